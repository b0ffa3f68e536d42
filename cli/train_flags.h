// The training recipe as flags: --train-config FILE (a TrainConfig JSON,
// trainer/train_config.h) and the common keys on top of it (--rank, --alpha,
// --targets, --steps, --batch, --lr, --seed). Absent keys keep the trainer's
// defaults, the fixtures' recipe (r 8, alpha 16, all 7 projections, lr 2e-3,
// 200 steps of batch 16). Used by `loragate scenario set --train`.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace loragate::cli {

struct TrainFlags {
  std::string config_file;
  int64_t rank = 0, steps = 0, batch = 0;
  double alpha = 0, lr = 0;
  uint64_t seed = 0;
  std::string targets;  // "q,k,v,o,gate,up,down"
  std::map<std::string, CLI::Option*> given;  // by flag, to know which were set
};

// Adds the flags to `cmd`.
std::shared_ptr<TrainFlags> add_train_flags(CLI::App* cmd);
// True when any of the flags was given.
bool any_train_flag(const TrainFlags& f);
// The config JSON: the file's, the flags on top, validated and with every key.
Result<nlohmann::json> train_config_json(const TrainFlags& f);

}  // namespace loragate::cli

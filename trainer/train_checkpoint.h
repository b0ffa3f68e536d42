// Resumable training checkpoints: <out>/checkpoint/ holds the LoRA matrices,
// the AdamW moments and step, the sampler position, the loss curve so far and
// the config and data/base identities the run started with. Written
// atomically (a new folder renamed over the old one), so an interrupted run
// leaves either the previous checkpoint or the new one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "trainer/adamw.h"
#include "trainer/lora_params.h"
#include "trainer/train_config.h"

namespace loragate::train {

struct LossPoint {
  int64_t step = 0;   // 1-based optimizer step
  double loss = 0;    // mean target-token cross-entropy of that step
  double grad_norm = 0;
  double lr = 0;
  int64_t tokens = 0; // target tokens in that step
};

// Who a run is: resume refuses a checkpoint made with another of these.
struct RunIdentity {
  nlohmann::json config;    // to_json(TrainConfig)
  std::string data_sha256;
  std::string base_sha256;
};

struct CheckpointState {
  int64_t step = 0;              // optimizer steps completed
  int64_t sampler_position = 0;  // micro-batches drawn
  std::vector<LossPoint> curve;
};

// Writes `params` (matrices only), `optimizer` moments and step, `state` and
// `identity` to <out_dir>/checkpoint.
Status save_checkpoint(const std::string& out_dir, const LoraParams& params, const AdamW& optimizer,
                       const CheckpointState& state, const RunIdentity& identity);

// Restores into `params` (already init()ed with the same recipe) and
// `optimizer`; not_found when <out_dir>/checkpoint is absent;
// failed_precondition, naming what differs, when `identity` is not the saved one.
Result<CheckpointState> load_checkpoint(const std::string& out_dir, LoraParams& params, AdamW& optimizer,
                                        const RunIdentity& identity);

// Removes <out_dir>/checkpoint and what an interrupted save may have left
// beside it (checkpoint.tmp-*, checkpoint.old), once a run is complete.
// Nothing to remove is not an error.
Status remove_checkpoint(const std::string& out_dir);

}  // namespace loragate::train

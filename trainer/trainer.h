// train_adapter(): one LoRA fine-tuning run, start to finish — load the base
// and the data, train, checkpoint, and write the PEFT folder with its record.
//
// <out>/adapter_config.json, <out>/adapter_model.safetensors: the adapter.
// <out>/training.json: the config, data path and sha256, base path and
//   sha256, dtype, the adapter it started from (init_from), the loss curve,
//   tokens and seconds.
// <out>/checkpoint/: resumable state while the run is incomplete; removed at the end.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/weight_type.h"
#include "trainer/train_checkpoint.h"
#include "trainer/train_config.h"

namespace loragate {
class ComputeGate;
}

namespace loragate::train {

struct TrainJob {
  std::string base_dir;
  WeightType dtype = WeightType::kF32;
  std::string data_path;
  std::string out_dir;
  TrainConfig config;
  bool resume = false;               // continue from <out>/checkpoint when present
  // A PEFT folder to start from instead of PEFT's initialisation (warm_start.h);
  // its LoRA shape replaces config.lora. "" = a fresh adapter.
  std::string init_from;
  // The sha256 the training file must have ("" = any): a file changed between
  // the caller's check and the read is refused, not trained on.
  std::string expect_data_sha256;
  std::vector<std::string> roots;    // data must lie inside one of them (empty: anywhere)
  // Inside a server: the compute pool's gate. Each sequence's forward and
  // backward pass then takes a background turn, so a live step waits at most
  // one sequence of training (gradients are summed per sequence: the same
  // values up to float summation order). Null: the pool is the trainer's.
  ComputeGate* gate = nullptr;
};

struct TrainProgress {
  int64_t step = 0, total_steps = 0;  // step: optimizer steps done
  double loss = 0;                    // this step's mean loss
  double lr = 0, grad_norm = 0;
  double tokens_per_s = 0;            // all tokens (not only targets) through forward+backward
  double elapsed_s = 0, eta_s = 0;
};

struct TrainReport {
  std::string out_dir;
  int64_t steps = 0;
  int64_t tokens = 0;           // tokens through forward + backward
  double seconds = 0;
  double first_loss = 0, last_loss = 0;  // first step's, mean of the last 10 steps
  std::vector<LossPoint> curve;
  std::string data_sha256, base_sha256;
};

// Runs `job`. on_step (optional) is called after every optimizer step.
// When `cancel` becomes true, saves a checkpoint and returns cancelled
// (resumable with job.resume).
Result<TrainReport> train_adapter(const TrainJob& job, const std::function<void(const TrainProgress&)>& on_step = {},
                                  const std::atomic<bool>* cancel = nullptr);

}  // namespace loragate::train

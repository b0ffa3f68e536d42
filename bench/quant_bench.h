// Accuracy of quantised storage against f32 on one model: teacher-forced
// greedy agreement and logit error (engine/logit_agreement.h) over
// continuations the f32 model generates for synthetic prompts, the weight
// bytes of each type, and for int8-outlier the share of activation columns
// that ran in f32, per layer.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace loragate::bench {

struct QuantBenchOptions {
  std::string model_dir;
  std::vector<std::string> dtypes = {"bf16", "int8", "int8-outlier", "int4", "int4-asym"};
  int prompts = 8;
  int prompt_len = 16;
  int new_tokens = 48;
  float outlier_threshold = 6.0f;
};

// Runs the benchmark and prints its report to stdout.
Status run_quant_bench(const QuantBenchOptions& options);

}  // namespace loragate::bench

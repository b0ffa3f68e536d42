// The training benchmark (`loragate bench train`): LoRA fine-tuning
// throughput on the CPU, beside this machine's FMA peak measured in the same
// run, as a fraction of the compute roof.
//
// Throughput mode (run_train_bench): TrainModel::forward_backward plus one
// AdamW step per optimizer step, over a fixed, deterministic walk of the
// examples (step s uses examples s·batch .. s·batch + batch - 1, modulo their
// count), so that another implementation given the same examples
// (--dump-examples, read by bench/torch_lora_train.py) does exactly the same
// work. Examples are synthetic (seq_len tokens each, every token after the
// first a loss target) or a JSONL training file tokenised as `loragate train`
// does. Tokens counted are all tokens through forward + backward.
//
// FLOPs of one optimizer step (useful work; the attention probabilities the
// backward pass recomputes are not counted), summed over its sequences of
// n tokens with T loss targets, for a base of L layers:
//   base linears   forward 2·P_layers·n,  backward 2·P_layers·n (activation
//                  gradients only: the frozen base gets no weight gradient,
//                  which is what LoRA saves of the usual 3× forward)
//   attention      forward 2·q_out·n(n+1)·L (causal QKᵀ and PV), backward 2× that
//   LoRA           forward 2·r·(in+out)·n per adapted module, backward 2× that
//   lm_head        forward 2·V·h·T and backward 2·V·h·T (only loss rows are computed)
// P_layers = Σ over layers of the q,k,v,o,gate,up,down weights; q_out = heads·head_dim.
// In short: ≈ 4·P_layers + 6·attention + 6·LoRA per token, plus 4·V·h per target.
//
// Fixture mode (run_train_fixture_bench): the three adapters of
// ../shared/eval trained end to end through train_adapter() with the
// fixtures' recipe; seconds per adapter.
#pragma once

#include <string>

#include "common/status.h"

namespace loragate::bench {

struct TrainBenchOptions {
  std::string model_dir;           // a Hugging Face model directory
  std::string dtype = "f32";       // the base's weight storage
  std::string data_path;           // JSONL training file; empty: synthetic examples
  std::string dump_examples;       // when set, write the examples used as JSONL {"ids", "target"}
  int batch = 16;                  // examples per optimizer step
  int seq_len = 128;               // tokens per synthetic example
  int steps = 4;                   // timed optimizer steps per repeat
  int repeats = 3;                 // medians are reported
  int threads = 0;                 // 0 = all cores
  int rank = 8;                    // LoRA on all 7 projections, alpha = 2 · rank
};

// Runs the throughput benchmark and prints its report to stdout.
Status run_train_bench(const TrainBenchOptions& options);

struct TrainFixtureBenchOptions {
  std::string eval_dir;            // ../shared/eval
  std::string base = "candidate-good";  // a folder of eval_dir/bases, or "online" (../models/stories260K)
  std::string dtype = "f32";
  int repeats = 1;                 // runs of each adapter; medians are reported
  int threads = 0;
};

// Trains mia, cat and sunny with the fixtures' recipe (r 8, alpha 16, all 7
// targets, Adam lr 2e-3, 200 steps of batch 16, seed 7000 + scenario index)
// into a temporary folder, and prints seconds per adapter.
Status run_train_fixture_bench(const TrainFixtureBenchOptions& options);

}  // namespace loragate::bench

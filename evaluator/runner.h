// The three-way comparison's data: runs a suite on two bases and scores it.
//
// Per scenario, the arms are online (online base + its adapter for the
// scenario), candidate (candidate base + the adapter retrained for it), both
// bases without adapter, and optionally the online adapter copied onto the
// candidate base. Every item is generated greedily one request at a time,
// the item's arms back to back in an order drawn per item from the seed
// (runner_order.h) so that machine noise hits them alike (TTFT and time per
// output token are per item); references are scored by teacher forcing in
// batches; the generic set gives each base's perplexity without adapters
// (runner_scoring.h). A row that does not finish or cannot be scored in full
// is recorded with why (ItemResult::unfinished / unscored) and the run goes
// on. Gates and verdicts are applied by the caller (gates.h).
//
// Not thread-safe: one run at a time per pair of ArmEngines.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "evaluator/arm_engine.h"
#include "evaluator/eval_types.h"

namespace loragate::eval {

// The adapter an arm uses for a scenario: its name on the arm's engine and
// its PEFT directory (registered under that name when not yet there).
struct AdapterChoice {
  std::string name;
  std::string dir;
};

struct RunnerOptions {
  std::string online_adapters;     // a directory with one PEFT folder per scenario name
  std::string candidate_adapters;  // the same, retrained for the candidate base
  // Instead of the two directories: the adapter of a scenario on the online
  // (candidate = false) or the candidate base, e.g. what the registry routes.
  std::function<Result<AdapterChoice>(const std::string& scenario, bool candidate)> adapter_for;
  bool copied_adapter_arm = false; // also run the online adapter on the candidate base (reported, not gated)
  // Only the arms without adapter and the generic set: how the bases compare
  // on their own, before any adapter exists for the candidate (an upgrade's
  // first stage). The adapter, recorded and latency gates then have no data.
  bool base_only = false;
  uint64_t seed = 1;               // draws the arms' order per item; recorded with the run (decoding is greedy)
  // Each item's generation is timed this many times back to back per arm; the
  // first result is scored, ttft_ms / tpot_ms are the medians of the repeats.
  int32_t latency_repeats = 1;
  // Called after each unit of work with (done, total); may be empty.
  std::function<void(int64_t done, int64_t total)> progress;
};

Result<RunResult> run_suite(const Suite& suite, ArmEngine& online, ArmEngine& candidate, const RunnerOptions& options);

}  // namespace loragate::eval

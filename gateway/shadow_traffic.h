// ShadowTraffic: a share of live requests also run on a candidate base, with
// the candidate's version of the same adapter (or scenario), to see how it
// would have answered real traffic. The live answer never waits for it: the
// copy goes to the candidate's own loop (below the serving base in the
// compute gate), and when the candidate already has max_in_flight shadow
// requests running the copy is dropped and counted. When both ends are in,
// agreement (the same output ids, greedy requests only) and both latencies
// are recorded per scenario (or adapter, when no scenario was named), in
// fixed-size histograms. describe() copies them under the lock and computes
// the percentiles after, so a reader never holds up the live path's offer().
//
// Lifetime: the targets, their statistics and the copies in flight live in a
// ShadowLedger that ShadowTraffic and every ShadowPair share. A copy the
// candidate's engine still holds when ShadowTraffic is destroyed (past its
// bounded wait) keeps the ledger alive and reports into it, never into freed
// memory; the pair is dropped when both of its ends are in.
//
// Thread-safety: every method may be called from any thread; sinks call in
// from the engines' step threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bases/base_set.h"
#include "engine/api.h"
#include "gateway/metrics/latency_histogram.h"
#include "gateway/model_resolver.h"

namespace loragate {

class ShadowPair;

struct ShadowStats {
  int64_t offered = 0;     // live requests that matched the fraction and scenarios
  int64_t shadowed = 0;    // copies submitted to the candidate
  int64_t dropped = 0;     // copies dropped because the candidate was behind
  int64_t unmatched = 0;   // the candidate has no version of the adapter or scenario
  int64_t compared = 0;    // greedy pairs with both answers in
  int64_t agreed = 0;      // of those, the same output ids
  // Fixed size, however long the server runs; copied out by describe().
  LatencyHistogram live_ttft_ms, shadow_ttft_ms, live_tpot_ms, shadow_tpot_ms;
};

// What ShadowTraffic and its pairs share (see above).
class ShadowLedger {
 public:
  struct Target {
    double fraction = 0;
    std::set<std::string> scenarios;
    double credit = 0;  // deterministic sampling: one copy each time credit reaches 1
    std::map<std::string, ShadowStats> stats;
  };

  // From a pair, once both ends are in (or the copy failed).
  void record(const std::string& base, const std::string& key, const GenerationResult* live,
              const GenerationResult* shadow, bool greedy);
  void finished(ShadowPair* pair);

  mutable std::mutex mu;
  std::condition_variable idle;
  std::map<std::string, Target> targets;                           // guarded by mu
  std::map<ShadowPair*, std::shared_ptr<ShadowPair>> in_flight;    // guarded by mu
  std::map<std::string, int32_t> in_flight_by_base;                // guarded by mu
};

class ShadowTraffic {
 public:
  static constexpr int32_t kMaxInFlight = 8;

  ShadowTraffic(BaseSet* bases, ModelResolver* resolver)
      : bases_(bases), resolver_(resolver), ledger_(std::make_shared<ShadowLedger>()) {}
  // Cancels the copies still running and waits (bounded) for their sinks.
  ~ShadowTraffic();

  // Shadows `fraction` (0..1; 0 = off) of live requests onto candidate base
  // `base`, only those of `scenarios` when not empty. Replaces earlier settings.
  Status set(const std::string& base, double fraction, std::set<std::string> scenarios);
  // {base, fraction, scenarios, stats: {<scenario>: {...}}}; not_found when never set.
  Result<nlohmann::json> describe(const std::string& base) const;
  // The per-scenario figures of `base` as the evaluator's live arm ({} when none).
  nlohmann::json live_arm(const std::string& base) const;

  // Called for every live request just before it is submitted to the serving
  // base: may copy it to the shadowed candidate. Returns the pair the live
  // sink must report its result to (null = not shadowed).
  // Only requests on the serving base are shadowed (not X-Base ones).
  std::shared_ptr<ShadowPair> offer(const ServingBase& live_base, const GenerationRequest& live,
                                    const std::string& scenario);

 private:
  BaseSet* bases_;
  ModelResolver* resolver_;
  const std::shared_ptr<ShadowLedger> ledger_;
};

// One live request and its shadow copy; the candidate's RequestSink.
class ShadowPair final : public RequestSink, public std::enable_shared_from_this<ShadowPair> {
 public:
  ShadowPair(std::shared_ptr<ShadowLedger> ledger, std::shared_ptr<ServingBase> candidate, std::string key,
             bool greedy)
      : ledger_(std::move(ledger)), candidate_(std::move(candidate)), key_(std::move(key)), greedy_(greedy) {}
  // The live request's end (from its StreamSink).
  void live_done(const GenerationResult& result);
  void on_token(int64_t, int32_t, std::string_view) override {}
  void on_finish(const GenerationResult& result) override;  // the shadow copy's end
  const std::shared_ptr<ServingBase>& candidate() const { return candidate_; }
  std::atomic<int64_t> id{0};  // the copy's request id on the candidate's loop

 private:
  void complete_if_both();

  const std::shared_ptr<ShadowLedger> ledger_;
  std::shared_ptr<ServingBase> candidate_;
  const std::string key_;
  const bool greedy_;
  std::mutex mu_;
  std::unique_ptr<GenerationResult> live_, shadow_;  // guarded by mu_
  bool recorded_ = false;                            // guarded by mu_
};

}  // namespace loragate

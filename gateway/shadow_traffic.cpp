#include "gateway/shadow_traffic.h"

#include <chrono>
#include <numeric>


namespace loragate {
namespace {

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

bool finished_normally(const GenerationResult& r) {
  return r.finish_reason == FinishReason::kLength || r.finish_reason == FinishReason::kStop;
}

nlohmann::json stats_json(const ShadowStats& s) {
  auto p = [](const LatencyHistogram& h, double q) { return h.percentile(q); };
  return {{"offered", s.offered},
          {"shadowed", s.shadowed},
          {"dropped", s.dropped},
          {"unmatched", s.unmatched},
          {"compared", s.compared},
          {"agreed", s.agreed},
          {"agreement", s.compared > 0 ? static_cast<double>(s.agreed) / static_cast<double>(s.compared) : 0.0},
          {"live_ttft_p50_ms", p(s.live_ttft_ms, 50)},
          {"shadow_ttft_p50_ms", p(s.shadow_ttft_ms, 50)},
          {"live_ttft_p99_ms", p(s.live_ttft_ms, 99)},
          {"shadow_ttft_p99_ms", p(s.shadow_ttft_ms, 99)},
          {"live_tpot_p50_ms", p(s.live_tpot_ms, 50)},
          {"shadow_tpot_p50_ms", p(s.shadow_tpot_ms, 50)}};
}

}  // namespace

ShadowTraffic::~ShadowTraffic() {
  std::unique_lock<std::mutex> lock(ledger_->mu);
  ledger_->targets.clear();
  for (const auto& [raw, pair] : ledger_->in_flight) {
    if (pair->id > 0) pair->candidate()->loop().cancel(pair->id);
  }
  // A copy cancelled this way still calls on_finish; a live end may be the other missing half.
  // Past the wait, the pairs left keep the ledger alive until their ends come in.
  ledger_->idle.wait_for(lock, std::chrono::seconds(10), [&] { return ledger_->in_flight.empty(); });
}

Status ShadowTraffic::set(const std::string& base, double fraction, std::set<std::string> scenarios) {
  if (!(fraction >= 0 && fraction <= 1)) return Status::invalid_argument("fraction must be in [0, 1]");
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> target, bases_->find(base));
  if (target == bases_->serving()) return Status::failed_precondition("base '" + base + "' is serving: nothing to shadow");
  std::lock_guard<std::mutex> lock(ledger_->mu);
  ShadowLedger::Target& t = ledger_->targets[base];
  t.fraction = fraction;
  t.scenarios = std::move(scenarios);
  return Status::ok();
}

Result<nlohmann::json> ShadowTraffic::describe(const std::string& base) const {
  ShadowLedger::Target target;
  {
    // Only a copy under the lock offer() takes on the live path: a few KiB per key.
    std::lock_guard<std::mutex> lock(ledger_->mu);
    auto it = ledger_->targets.find(base);
    if (it == ledger_->targets.end()) return Status::not_found("no shadow traffic was set for base '" + base + "'");
    target = it->second;
  }
  nlohmann::json stats = nlohmann::json::object();
  for (const auto& [key, s] : target.stats) stats[key] = stats_json(s);
  return nlohmann::json{{"base", base}, {"fraction", target.fraction}, {"scenarios", target.scenarios}, {"stats", stats}};
}

nlohmann::json ShadowTraffic::live_arm(const std::string& base) const {
  Result<nlohmann::json> d = describe(base);
  return d.is_ok() ? (*d)["stats"] : nlohmann::json::object();
}

std::shared_ptr<ShadowPair> ShadowTraffic::offer(const ServingBase& live_base, const GenerationRequest& live,
                                                 const std::string& scenario) {
  if (bases_->serving().get() != &live_base) return nullptr;
  std::string chosen;
  const std::string key = !scenario.empty() ? scenario : live.adapter.empty() ? "base" : live.adapter;
  {
    std::lock_guard<std::mutex> lock(ledger_->mu);
    for (auto& [base, t] : ledger_->targets) {
      if (t.fraction <= 0 || (!t.scenarios.empty() && !t.scenarios.count(scenario))) continue;
      t.credit += t.fraction;
      if (t.credit < 1.0) continue;
      t.credit -= 1.0;
      ++t.stats[key].offered;
      if (ledger_->in_flight_by_base[base] >= kMaxInFlight) {  // behind: never queue up on the live path
        ++t.stats[key].dropped;
        continue;
      }
      chosen = base;
      break;
    }
  }
  if (chosen.empty()) return nullptr;
  auto unmatched = [&] {
    std::lock_guard<std::mutex> lock(ledger_->mu);
    ++ledger_->targets[chosen].stats[key].unmatched;
    return nullptr;
  };
  Result<std::shared_ptr<ServingBase>> candidate = bases_->find(chosen);
  if (!candidate.is_ok()) return unmatched();
  GenerationRequest copy = live;
  if (!scenario.empty() && resolver_ != nullptr) {
    Result<std::string> routed = resolver_->resolve_scenario(scenario, chosen);
    if (!routed.is_ok()) return unmatched();
    copy.adapter = *routed;
  }
  if (!copy.adapter.empty() && !(*candidate)->adapters()->contains(copy.adapter)) return unmatched();
  auto pair = std::make_shared<ShadowPair>(ledger_, *candidate, key, live.params.temperature == 0);
  copy.sink = pair.get();
  {
    std::lock_guard<std::mutex> lock(ledger_->mu);
    ledger_->in_flight[pair.get()] = pair;
    ++ledger_->in_flight_by_base[chosen];
  }
  Result<int64_t> id = (*candidate)->loop().submit(std::move(copy));
  if (!id.is_ok()) {
    ledger_->finished(pair.get());
    return unmatched();
  }
  pair->id = *id;
  std::lock_guard<std::mutex> lock(ledger_->mu);
  ++ledger_->targets[chosen].stats[key].shadowed;
  return pair;
}

void ShadowLedger::record(const std::string& base, const std::string& key, const GenerationResult* live,
                          const GenerationResult* shadow, bool greedy) {
  if (live == nullptr || shadow == nullptr) return;
  if (!finished_normally(*live) || !finished_normally(*shadow)) return;
  // Everything but the counters is worked out before the lock the live path takes.
  const bool agreed = greedy && live->output_ids == shadow->output_ids;
  const double live_tpot = mean_of(live->itl_ms), shadow_tpot = mean_of(shadow->itl_ms);
  std::lock_guard<std::mutex> lock(mu);
  auto it = targets.find(base);
  if (it == targets.end()) return;
  ShadowStats& s = it->second.stats[key];
  if (greedy) {
    ++s.compared;
    if (agreed) ++s.agreed;
  }
  s.live_ttft_ms.add(live->ttft_ms);
  s.shadow_ttft_ms.add(shadow->ttft_ms);
  s.live_tpot_ms.add(live_tpot);
  s.shadow_tpot_ms.add(shadow_tpot);
}

void ShadowLedger::finished(ShadowPair* pair) {
  std::shared_ptr<ShadowPair> last;  // dropped after the lock: it may be the pair's last owner
  std::lock_guard<std::mutex> lock(mu);
  auto it = in_flight.find(pair);
  if (it == in_flight.end()) return;
  last = std::move(it->second);
  in_flight.erase(it);
  --in_flight_by_base[last->candidate()->name()];
  if (in_flight.empty()) idle.notify_all();
}

void ShadowPair::live_done(const GenerationResult& result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_ = std::make_unique<GenerationResult>(result);
  }
  complete_if_both();
}

void ShadowPair::on_finish(const GenerationResult& result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shadow_ = std::make_unique<GenerationResult>(result);
  }
  complete_if_both();
}

void ShadowPair::complete_if_both() {
  const std::shared_ptr<ShadowPair> self = shared_from_this();  // finished() may drop the last other owner
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!live_ || !shadow_ || recorded_) return;
    recorded_ = true;
  }
  ledger_->record(candidate_->name(), key_, live_.get(), shadow_.get(), greedy_);
  ledger_->finished(this);
}

}  // namespace loragate

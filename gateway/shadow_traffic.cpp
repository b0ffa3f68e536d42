#include "gateway/shadow_traffic.h"

#include <chrono>
#include <numeric>

#include "evaluator/metrics.h"

namespace loragate {
namespace {

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

bool finished_normally(const GenerationResult& r) {
  return r.finish_reason == FinishReason::kLength || r.finish_reason == FinishReason::kStop;
}

nlohmann::json stats_json(const ShadowStats& s) {
  auto p = [](const std::vector<double>& v, double q) { return v.empty() ? 0.0 : eval::percentile(v, q); };
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
  std::unique_lock<std::mutex> lock(mu_);
  targets_.clear();
  for (const auto& [raw, pair] : in_flight_) {
    if (pair->id > 0) pair->candidate()->loop().cancel(pair->id);
  }
  // A copy cancelled this way still calls on_finish; a live end may be the other missing half.
  idle_.wait_for(lock, std::chrono::seconds(10), [&] { return in_flight_.empty(); });
}

Status ShadowTraffic::set(const std::string& base, double fraction, std::set<std::string> scenarios) {
  if (!(fraction >= 0 && fraction <= 1)) return Status::invalid_argument("fraction must be in [0, 1]");
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> target, bases_->find(base));
  if (target == bases_->serving()) return Status::failed_precondition("base '" + base + "' is serving: nothing to shadow");
  std::lock_guard<std::mutex> lock(mu_);
  Target& t = targets_[base];
  t.fraction = fraction;
  t.scenarios = std::move(scenarios);
  return Status::ok();
}

Result<nlohmann::json> ShadowTraffic::describe(const std::string& base) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = targets_.find(base);
  if (it == targets_.end()) return Status::not_found("no shadow traffic was set for base '" + base + "'");
  nlohmann::json stats = nlohmann::json::object();
  for (const auto& [key, s] : it->second.stats) stats[key] = stats_json(s);
  return nlohmann::json{{"base", base},
                        {"fraction", it->second.fraction},
                        {"scenarios", it->second.scenarios},
                        {"stats", stats}};
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
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [base, t] : targets_) {
      if (t.fraction <= 0 || (!t.scenarios.empty() && !t.scenarios.count(scenario))) continue;
      t.credit += t.fraction;
      if (t.credit < 1.0) continue;
      t.credit -= 1.0;
      ++t.stats[key].offered;
      if (in_flight_by_base_[base] >= kMaxInFlight) {  // behind: never queue up on the live path
        ++t.stats[key].dropped;
        continue;
      }
      chosen = base;
      break;
    }
  }
  if (chosen.empty()) return nullptr;
  auto unmatched = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    ++targets_[chosen].stats[key].unmatched;
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
  auto pair = std::make_shared<ShadowPair>(this, *candidate, key, live.params.temperature == 0);
  copy.sink = pair.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_[pair.get()] = pair;
    ++in_flight_by_base_[chosen];
  }
  Result<int64_t> id = (*candidate)->loop().submit(std::move(copy));
  if (!id.is_ok()) {
    finished(pair.get());
    return unmatched();
  }
  pair->id = *id;
  std::lock_guard<std::mutex> lock(mu_);
  ++targets_[chosen].stats[key].shadowed;
  return pair;
}

void ShadowTraffic::record(const std::string& base, const std::string& key, const GenerationResult* live,
                           const GenerationResult* shadow, bool greedy) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = targets_.find(base);
  if (it == targets_.end() || live == nullptr || shadow == nullptr) return;
  if (!finished_normally(*live) || !finished_normally(*shadow)) return;
  ShadowStats& s = it->second.stats[key];
  if (greedy) {
    ++s.compared;
    if (live->output_ids == shadow->output_ids) ++s.agreed;
  }
  s.live_ttft_ms.push_back(live->ttft_ms);
  s.shadow_ttft_ms.push_back(shadow->ttft_ms);
  s.live_tpot_ms.push_back(mean_of(live->itl_ms));
  s.shadow_tpot_ms.push_back(mean_of(shadow->itl_ms));
}

void ShadowTraffic::finished(ShadowPair* pair) {
  std::shared_ptr<ShadowPair> last;  // dropped after the lock: it may be the pair's last owner
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(pair);
  if (it == in_flight_.end()) return;
  last = std::move(it->second);
  in_flight_.erase(it);
  --in_flight_by_base_[last->candidate()->name()];
  if (in_flight_.empty()) idle_.notify_all();
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
  traffic_->record(candidate_->name(), key_, live_.get(), shadow_.get(), greedy_);
  traffic_->finished(this);
}

}  // namespace loragate

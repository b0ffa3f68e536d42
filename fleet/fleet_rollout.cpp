#include "fleet/fleet_rollout.h"

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/http_client.h"

namespace loragate {
namespace {

using nlohmann::json;
using client::ClientOptions;
using client::Headers;
using client::HttpClient;
using client::HttpResult;

constexpr std::chrono::milliseconds kPoll{100};

Result<HttpResult> call(const std::string& url, std::string_view method, std::string_view target,
                        std::string_view body = {}, const Headers& headers = {}) {
  ClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.read_timeout = std::chrono::milliseconds(30000);
  LG_ASSIGN_OR_RETURN(HttpClient client, HttpClient::create(url, o));
  return client.request(method, target, body, headers);
}

std::string joined_urls(const std::vector<std::string>& urls) {
  std::string out;
  for (const std::string& u : urls) out += (out.empty() ? "" : ", ") + u;
  return out;
}

// Whether heartbeat `bases` (JSON [{name, state}]) holds `base` loaded.
bool holds_loaded(const std::string& bases, const std::string& base) {
  const json j = json::parse(bases, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return false;
  for (const json& b : j) {
    if (!b.is_object() || b.value("name", "") != base) continue;
    const std::string state = b.value("state", "");
    return state != "loading" && state != "failed";
  }
  return false;
}

}  // namespace

Result<int64_t> replica_server_errors(const std::string& url, const std::string& admin_token) {
  Headers headers;
  if (!admin_token.empty()) headers.emplace_back("Authorization", "Bearer " + admin_token);
  LG_ASSIGN_OR_RETURN(HttpResult r, call(url, "GET", "/metrics", {}, headers));
  if (r.status != 200) return Status::unavailable(url + "/metrics answered " + std::to_string(r.status));
  std::istringstream lines(r.body);
  int64_t errors = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("loragate_requests_total{", 0) != 0 || line.find("status=\"5") == std::string::npos) continue;
    const size_t space = line.rfind(' ');
    // strtod, not stod: a malformed sample is counted as 0, never an exception on an admin thread.
    if (space != std::string::npos) errors += static_cast<int64_t>(std::strtod(line.c_str() + space + 1, nullptr));
  }
  return errors;
}

FleetRollout::FleetRollout(RolloutOptions options, FleetMember* self, Registry* registry, BaseSet* bases)
    : options_(std::move(options)), self_(self), registry_(registry), bases_(bases) {}

Result<std::vector<ReplicaRecord>> FleetRollout::live_replicas() {
  LG_ASSIGN_OR_RETURN(std::vector<ReplicaRecord> all, registry_->list_replicas());
  const int64_t now = fleet_now_ms();
  std::vector<ReplicaRecord> live, self;
  for (ReplicaRecord& r : all) {
    if (replica_lost(r, self_->options(), now)) continue;
    (r.url == self_->options().url ? self : live).push_back(std::move(r));
  }
  live.insert(live.end(), self.begin(), self.end());
  return live;
}

Status FleetRollout::wait_for(const std::vector<std::string>& urls, const std::string& base, bool serving) {
  const auto deadline = std::chrono::steady_clock::now() + options_.swap_timeout;
  for (;;) {
    LG_ASSIGN_OR_RETURN(std::vector<ReplicaRecord> all, registry_->list_replicas());
    std::vector<std::string> missing;
    for (const std::string& url : urls) {
      bool ok = false;
      for (const ReplicaRecord& r : all) {
        if (r.url == url) ok = serving ? r.serving == base : holds_loaded(r.bases, base);
      }
      if (!ok) missing.push_back(url);
    }
    if (missing.empty()) return Status::ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::unavailable("replica(s) " + joined_urls(missing) + (serving ? " did not serve" : " did not load") +
                                 " base '" + base + "' within " + std::to_string(options_.swap_timeout.count()) +
                                 " ms");
    }
    std::this_thread::sleep_for(kPoll);
  }
}

Status FleetRollout::check_replica(const std::string& url, const std::string& base, int64_t errors_before) {
  LG_ASSIGN_OR_RETURN(HttpResult ready, call(url, "GET", "/ready"));
  if (ready.status != 200) return Status::unavailable(url + "/ready answered " + std::to_string(ready.status));
  LG_ASSIGN_OR_RETURN(std::vector<ScenarioRecord> scenarios, registry_->list_scenarios(base));
  std::vector<std::string> names;
  for (const ScenarioRecord& s : scenarios) names.push_back(s.name);
  if (names.empty()) names.push_back("");  // the base alone
  const std::string body = json{{"prompt", "Hello"}, {"max_tokens", 1}, {"temperature", 0}}.dump();
  for (const std::string& scenario : names) {
    Headers headers;
    if (!scenario.empty()) headers.emplace_back("X-Scenario", scenario);
    const std::string what = scenario.empty() ? "the base" : "scenario '" + scenario + "'";
    LG_ASSIGN_OR_RETURN(HttpResult r, call(url, "POST", "/v1/completions", body, headers));
    if (r.status != 200) {
      return Status::failed_precondition("smoke request for " + what + " on " + url + " answered " +
                                         std::to_string(r.status) + ": " + r.body.substr(0, 300));
    }
    if (r.header("X-Base") != base) {
      return Status::failed_precondition("smoke request for " + what + " on " + url + " was answered by base '" +
                                         r.header("X-Base") + "', not '" + base + "'");
    }
  }
  LG_ASSIGN_OR_RETURN(const int64_t errors_after, replica_server_errors(url, options_.admin_token));
  if (errors_after > errors_before) {
    return Status::failed_precondition("live traffic on " + url + " got " + std::to_string(errors_after - errors_before) +
                                       " more 5xx answer(s) after the swap");
  }
  return Status::ok();
}

Status FleetRollout::roll_back(RolloutRecord& record, const std::vector<std::string>& asked, const std::string& why) {
  for (const std::string& url : asked) {
    Status s = registry_->set_replica_desired_base(url, "");
    if (!s.is_ok()) std::fprintf(stderr, "loragate fleet: releasing %s: %s\n", url.c_str(), s.to_string().c_str());
  }
  const Status back = wait_for(asked, record.from_base, /*serving=*/true);
  record.state = "rolled_back";
  record.error = why + (back.is_ok() ? "" : "; " + back.message());
  json steps = json::parse(record.steps, nullptr, false);
  if (!steps.is_array()) steps = json::array();
  steps.push_back({{"rolled_back", asked}, {"ok", back.is_ok()}});
  record.steps = steps.dump();
  LG_RETURN_IF_ERROR(registry_->update_rollout(record));
  return Status::failed_precondition("rollout " + std::to_string(record.id) + " of base '" + record.to_base +
                                     "' rolled back: " + record.error);
}

Result<RolloutRecord> FleetRollout::promote(const std::string& to, bool force, const std::string& actor) {
  std::lock_guard lock(mu_);
  std::shared_ptr<ServingBase> serving = bases_->serving();
  if (serving == nullptr) return Status::failed_precondition("no base serves here yet");
  const std::string from = serving->name();
  if (from == to) return Status::failed_precondition("base '" + to + "' is serving already");
  LG_ASSIGN_OR_RETURN(std::vector<std::string> blockers, bases_->promotion_blockers(to));
  if (!blockers.empty() && !force) {
    std::string why;
    for (const std::string& b : blockers) why += (why.empty() ? "" : "; ") + b;
    return Status::failed_precondition("cannot promote '" + to + "' over '" + from + "': " + why +
                                       "; evaluate again or promote with force");
  }
  LG_ASSIGN_OR_RETURN(std::vector<ReplicaRecord> replicas, live_replicas());
  std::vector<std::string> urls;
  for (const ReplicaRecord& r : replicas) urls.push_back(r.url);
  LG_RETURN_IF_ERROR(wait_for(urls, to, /*serving=*/false).with_context("before the rollout"));

  RolloutRecord record;
  record.kind = kSwapKindPromote;
  record.from_base = from;
  record.to_base = to;
  record.coordinator = self_->options().url;
  LG_ASSIGN_OR_RETURN(record, registry_->add_rollout(record));
  json steps = json::array();
  std::vector<std::string> asked;
  const size_t batch = static_cast<size_t>(std::max(1, options_.max_unavailable));
  for (size_t i = 0; i < urls.size(); i += batch) {
    const std::vector<std::string> group(urls.begin() + static_cast<std::ptrdiff_t>(i),
                                         urls.begin() + static_cast<std::ptrdiff_t>(std::min(urls.size(), i + batch)));
    std::vector<int64_t> before;
    for (const std::string& url : group) {
      Result<int64_t> errors = replica_server_errors(url, options_.admin_token);
      if (!errors.is_ok()) return roll_back(record, asked, "replica " + url + ": " + errors.status().message());
      before.push_back(*errors);
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (const std::string& url : group) {
      asked.push_back(url);
      if (Status s = registry_->set_replica_desired_base(url, to); !s.is_ok()) {
        return roll_back(record, asked, "asking " + url + " to swap: " + s.message());
      }
    }
    if (Status s = wait_for(group, to, /*serving=*/true); !s.is_ok()) return roll_back(record, asked, s.message());
    for (size_t k = 0; k < group.size(); ++k) {
      Status checked = check_replica(group[k], to, before[k]);
      steps.push_back({{"replica", group[k]},
                       {"swap_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - t0)
                                       .count()},
                       {"check", checked.is_ok() ? "passed" : checked.message()}});
      record.steps = steps.dump();
      if (!checked.is_ok()) return roll_back(record, asked, "replica " + group[k] + ": " + checked.message());
    }
    LG_RETURN_IF_ERROR(registry_->update_rollout(record));
  }

  SwapRecord swap;
  swap.actor = actor.empty() ? "admin" : actor;
  swap.from_base = from;
  swap.to_base = to;
  swap.kind = kSwapKindPromote;
  swap.forced = force && !blockers.empty();
  swap.note = "fleet rollout " + std::to_string(record.id) + " across " + std::to_string(urls.size()) + " replica(s)";
  LG_RETURN_IF_ERROR(registry_->record_swap(swap).status());
  for (const std::string& url : asked) {
    Status s = registry_->set_replica_desired_base(url, "");  // the fleet's serving base is `to` now
    if (!s.is_ok()) std::fprintf(stderr, "loragate fleet: releasing %s: %s\n", url.c_str(), s.to_string().c_str());
  }
  record.state = "done";
  LG_RETURN_IF_ERROR(registry_->update_rollout(record));
  return record;
}

}  // namespace loragate

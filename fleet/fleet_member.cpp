#include "fleet/fleet_member.h"

#include <cstdio>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "bases/base_records.h"

namespace loragate {
namespace {

// How long the loop waits for a registry change at most, so stop() is prompt.
constexpr std::chrono::milliseconds kMaxWait{250};

bool keeps_loaded(BaseModelState s) {
  return s == BaseModelState::kServing || s == BaseModelState::kCandidate || s == BaseModelState::kPrevious ||
         s == BaseModelState::kLoading;
}

void log_fleet(const std::string& what, const Status& s) {
  if (!s.is_ok()) std::fprintf(stderr, "loragate fleet: %s: %s\n", what.c_str(), s.to_string().c_str());
}

}  // namespace

int64_t fleet_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool replica_lost(const ReplicaRecord& replica, const FleetOptions& options, int64_t now_ms) {
  return now_ms - replica.last_seen > options.lost_after.count();
}

FleetMember::FleetMember(FleetOptions options, Registry* registry, BaseSet* bases,
                         std::function<void()> routes_changed)
    : options_(std::move(options)),
      registry_(registry),
      bases_(bases),
      routes_changed_(std::move(routes_changed)),
      started_at_(fleet_now_ms() / 1000) {}

FleetMember::~FleetMember() { stop(); }

Result<std::string> FleetMember::target_base() {
  LG_ASSIGN_OR_RETURN(std::vector<ReplicaRecord> replicas, registry_->list_replicas());
  for (const ReplicaRecord& r : replicas) {
    if (r.url == options_.url && !r.desired_base.empty()) return r.desired_base;
  }
  LG_ASSIGN_OR_RETURN(std::vector<BaseModelRecord> records, registry_->list_base_models());
  for (const BaseModelRecord& b : records) {
    if (b.state == BaseModelState::kServing) return b.name;
  }
  return std::string();
}

Status FleetMember::heartbeat_now() {
  std::lock_guard lock(pass_mu_);
  ReplicaRecord me;
  me.url = options_.url;
  me.started_at = started_at_;
  if (std::shared_ptr<ServingBase> serving = bases_->serving()) me.serving = serving->name();
  nlohmann::json bases = nlohmann::json::array(), adapters = nlohmann::json::array();
  for (const BaseStatus& b : bases_->list()) {
    bases.push_back({{"name", b.name}, {"state", base_state_name(b.state)}});
    for (const std::string& a : b.adapters) adapters.push_back({{"name", a}, {"base", b.name}});
  }
  me.bases = bases.dump();
  me.adapters = adapters.dump();
  return registry_->upsert_replica(me).status();
}

Status FleetMember::reconcile_now() {
  std::lock_guard lock(pass_mu_);
  LG_ASSIGN_OR_RETURN(std::vector<BaseModelRecord> records, registry_->list_base_models());
  LG_RETURN_IF_ERROR(reconcile_bases(records));
  LG_RETURN_IF_ERROR(reconcile_adapters());
  LG_RETURN_IF_ERROR(end_orphaned_rollouts());
  if (routes_changed_) routes_changed_();
  return Status::ok();
}

Status FleetMember::reconcile_bases(const std::vector<BaseModelRecord>& records) {
  std::map<std::string, BaseState> local;
  for (const BaseStatus& b : bases_->list()) local[b.name] = b.state;
  for (const BaseModelRecord& r : records) {
    auto here = local.find(r.name);
    if (keeps_loaded(r.state) && (here == local.end() || here->second == BaseState::kFailed)) {
      Result<WeightType> dtype = parse_weight_type(r.dtype);
      const BaseState after = r.state == BaseModelState::kPrevious ? BaseState::kPrevious : BaseState::kCandidate;
      // Not recorded: the shared record is the fleet's, not this replica's load.
      Status s = dtype.is_ok() ? bases_->add(BaseSpec{r.name, r.path, *dtype}, after, /*record=*/false)
                               : dtype.status();
      log_fleet("loading base '" + r.name + "'", s);
    } else if (r.state == BaseModelState::kRetired && here != local.end() && here->second != BaseState::kServing &&
               here->second != BaseState::kLoading) {
      log_fleet("unloading retired base '" + r.name + "'", bases_->remove(r.name));
    }
  }
  LG_ASSIGN_OR_RETURN(const std::string target, target_base());
  std::shared_ptr<ServingBase> serving = bases_->serving();
  if (target.empty() || (serving && serving->name() == target)) return Status::ok();
  if (!bases_->find(target).is_ok()) return Status::ok();  // still loading: the next pass swaps
  LG_RETURN_IF_ERROR(bases_->follow(target, "fleet"));
  std::fprintf(stderr, "loragate fleet: %s now serves base '%s'\n", options_.url.c_str(), target.c_str());
  return Status::ok();
}

Status FleetMember::reconcile_adapters() {
  LG_ASSIGN_OR_RETURN(std::vector<AdapterRecord> adapters, registry_->list_adapters(""));
  std::set<std::pair<std::string, std::string>> now;
  for (const AdapterRecord& a : adapters) {
    if (a.state == AdapterState::kReady) now.emplace(a.base_model, a.name);
  }
  for (const BaseStatus& b : bases_->list()) {
    Result<std::shared_ptr<ServingBase>> base = bases_->find(b.name);
    if (!base.is_ok()) continue;
    log_fleet("restoring adapters of base '" + b.name + "'", restore_adapters(registry_, **base));
    for (const std::string& name : b.adapters) {
      const std::pair<std::string, std::string> key{b.name, name};
      if (registered_.count(key) != 0 && now.count(key) == 0) {
        log_fleet("dropping adapter '" + name + "' of base '" + b.name + "'", (*base)->adapters()->remove(name));
      }
    }
  }
  registered_ = std::move(now);
  return Status::ok();
}

Status FleetMember::end_orphaned_rollouts() {
  LG_ASSIGN_OR_RETURN(std::vector<RolloutRecord> rollouts, registry_->list_rollouts(5));
  LG_ASSIGN_OR_RETURN(std::vector<ReplicaRecord> replicas, registry_->list_replicas());
  const int64_t now = fleet_now_ms();
  for (RolloutRecord& r : rollouts) {
    if (r.state != "rolling") continue;
    bool alive = false;
    for (const ReplicaRecord& rep : replicas) {
      // A coordinator restarted since the rollout began lost its rollout too.
      if (rep.url == r.coordinator && !replica_lost(rep, options_, now) && rep.started_at <= r.started_at) {
        alive = true;
      }
    }
    if (alive) continue;
    r.state = "failed";
    r.error = "the coordinator " + r.coordinator + " stopped during the rollout; every replica returns to the "
              "fleet's serving base";
    LG_RETURN_IF_ERROR(registry_->update_rollout(r));
    for (const ReplicaRecord& rep : replicas) {
      if (!rep.desired_base.empty()) LG_RETURN_IF_ERROR(registry_->set_replica_desired_base(rep.url, ""));
    }
    std::fprintf(stderr, "loragate fleet: rollout %lld ended: %s\n", static_cast<long long>(r.id), r.error.c_str());
  }
  return Status::ok();
}

bool FleetMember::loading_here() const {
  for (const BaseStatus& b : bases_->list()) {
    if (b.state == BaseState::kLoading) return true;
  }
  return false;
}

void FleetMember::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void FleetMember::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FleetMember::run() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point next_heartbeat = Clock::now(), next_reconcile = Clock::now();
  bool changed = true;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    const Clock::time_point now = Clock::now();
    if (now >= next_heartbeat) {
      log_fleet("heartbeat", heartbeat_now());
      next_heartbeat = now + options_.heartbeat;
    }
    if (changed || now >= next_reconcile) {
      Status s = reconcile_now();
      log_fleet("reconcile", s);
      next_reconcile = now + options_.reconcile;
      // A failed pass, or a base still loading: look again soon rather than at the next period.
      if (!s.is_ok() || loading_here()) next_reconcile = now + kMaxWait;
      log_fleet("heartbeat", heartbeat_now());  // report what the reconcile changed at once
      next_heartbeat = Clock::now() + options_.heartbeat;
    }
    const auto wait = std::min<Clock::duration>({next_heartbeat - Clock::now(), next_reconcile - Clock::now(),
                                                 Clock::duration(kMaxWait)});
    const int64_t wait_ms = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wait).count());
    Result<bool> woke = registry_->wait_for_change(wait_ms);
    changed = !woke.is_ok() || *woke;
    if (!woke.is_ok()) {
      log_fleet("waiting for registry changes", woke.status());
      std::unique_lock lock(mu_);  // the registry is down: do not spin
      wake_.wait_for(lock, options_.heartbeat, [&] { return stopping_; });
    }
  }
}

}  // namespace loragate

#include "bases/base_set.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cstdio>

#include "bases/base_records.h"
#include "bases/promotion_policy.h"
#include "model/model_config.h"

namespace loragate {
namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

BaseSet::BaseSet(BaseSetOptions options, Registry* registry)
    : options_(std::move(options)),
      registry_(registry),
      gate_(std::make_shared<ComputeGate>(options_.candidate_share)) {
  reaper_ = std::thread([this] { reaper_main(); });
}

BaseSet::~BaseSet() {
  loader_.stop();  // a load cannot be interrupted; queued ones stay "loading" in the registry and load at restart
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  reaper_.join();
  // Entries go with the set: their loops stop and cancel what is left.
}

// --- loading --------------------------------------------------------------------

Status BaseSet::check_budget_locked(const std::string& name, const MemoryEstimate& need) const {
  if (options_.memory_budget_bytes <= 0) return Status::ok();
  int64_t used = 0;
  std::string users;
  for (const auto& [other, e] : entries_) {
    const int64_t bytes = e.base ? e.base->memory_bytes() : e.state == BaseState::kLoading ? e.estimate.total() : 0;
    if (bytes == 0) continue;
    used += bytes;
    users += (users.empty() ? "" : ", ") + other + " " + mib(bytes);
  }
  // Removed bases hold their memory until their last request ends and the reaper frees them.
  for (const std::shared_ptr<ServingBase>& removed : graveyard_) {
    used += removed->memory_bytes();
    users += (users.empty() ? "" : ", ") + removed->name() + " " + mib(removed->memory_bytes()) +
             " (removed, draining its requests)";
  }
  if (freeing_bytes_ > 0) {
    used += freeing_bytes_;
    users += (users.empty() ? "" : ", ") + mib(freeing_bytes_) + " of removed bases being freed";
  }
  if (used + need.total() <= options_.memory_budget_bytes) return Status::ok();
  return Status::insufficient_memory(
      "base '" + name + "' needs " + mib(need.total()) + " (weights " + mib(need.weights_bytes) + " + KV " +
      mib(need.kv_bytes) + " + LoRA slots " + mib(need.lora_slot_bytes) + ") but " + mib(used) + " of the " +
      mib(options_.memory_budget_bytes) + " budget (engine.memory_budget_mib) are in use" +
      (users.empty() ? "" : " (" + users + ")") + "; remove a base first");
}

Status BaseSet::start_serving(const BaseSpec& spec, const std::string& actor) {
  std::lock_guard<std::mutex> admin(admin_mu_);
  LG_RETURN_IF_ERROR(validate_name("base model name", spec.name, /*allow_slash=*/true));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!serving_name_.empty()) return Status::failed_precondition("base '" + serving_name_ + "' serves already");
  }
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> base,
                      ServingBase::load(spec, options_.engine, gate_, /*serving=*/true));
  LG_RETURN_IF_ERROR(record_start_up(registry_, spec, *base, actor));
  LG_RETURN_IF_ERROR(restore_adapters(registry_, *base));
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[spec.name];
  e.spec = spec;
  e.state = BaseState::kServing;
  e.base = std::move(base);
  e.error.clear();
  serving_name_ = spec.name;
  serving_.store(e.base);
  changed_.notify_all();
  return Status::ok();
}

Status BaseSet::add(const BaseSpec& spec, BaseState after_load, bool record) {
  std::lock_guard<std::mutex> admin(admin_mu_);
  LG_RETURN_IF_ERROR(validate_name("base model name", spec.name, /*allow_slash=*/true));
  if (after_load != BaseState::kCandidate && after_load != BaseState::kPrevious) {
    return Status::internal("a base can only load as candidate or previous");
  }
  LG_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::load(spec.path));
  EngineOptions o = options_.engine;
  o.weight_dtype = spec.dtype;
  LG_ASSIGN_OR_RETURN(MemoryEstimate need, estimate_engine_memory(config, o));
  Entry loading;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(spec.name);
    if (it != entries_.end() && it->second.state != BaseState::kFailed) {
      return Status::failed_precondition("base '" + spec.name + "' is already " + base_state_name(it->second.state) +
                                         "; remove it first (DELETE /admin/bases/" + spec.name + ")");
    }
    LG_RETURN_IF_ERROR(check_budget_locked(spec.name, need));
    Entry& e = entries_[spec.name];
    e.spec = spec;
    e.state = BaseState::kLoading;
    e.base.reset();
    e.estimate = need;
    e.error.clear();
    e.recorded = record;
    loading = e;
  }
  record_state(loading);
  loader_.enqueue([this, spec, after_load] { load_in_background(spec, after_load); });
  return Status::ok();
}

// On the loader thread.
void BaseSet::load_in_background(const BaseSpec& spec, BaseState after_load) {
  Result<std::shared_ptr<ServingBase>> loaded = ServingBase::load(spec, options_.engine, gate_, /*serving=*/false);
  Status restored = loaded.is_ok() ? restore_adapters(registry_, **loaded) : loaded.status();
  // admin_mu_ orders this record after add's and before any remove's; the
  // registry hears first, so whoever sees the new state finds it recorded.
  std::lock_guard<std::mutex> admin(admin_mu_);
  Entry done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(spec.name);
    if (it == entries_.end()) return;
    done = it->second;
  }
  if (restored.is_ok()) {
    done.state = after_load;
    done.base = std::move(loaded).value();
  } else {
    done.state = BaseState::kFailed;
    done.error = restored.to_string();
    std::fprintf(stderr, "loragate: base '%s' failed to load: %s\n", spec.name.c_str(), done.error.c_str());
  }
  record_state(done);
  std::lock_guard<std::mutex> lock(mu_);
  entries_[spec.name] = std::move(done);
  changed_.notify_all();
}

// Never under mu_: a registry write waits for an fsync, and find() must not.
void BaseSet::record_state(const Entry& e) {
  if (!e.recorded) return;
  record_base_state(registry_, e.spec, e.state, e.base ? e.base->sha256() : "", e.error);
}

// --- removing ---------------------------------------------------------------------

Status BaseSet::remove(const std::string& name) {
  std::lock_guard<std::mutex> admin(admin_mu_);  // no state changes under us: loaders take it too
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return Status::not_found("base '" + name + "' is not loaded");
    if (it->second.state == BaseState::kServing) {
      return Status::failed_precondition("base '" + name + "' is serving: promote another base or roll back first");
    }
    if (it->second.state == BaseState::kLoading) {
      return Status::failed_precondition("base '" + name + "' is still loading; remove it once it is loaded");
    }
  }
  if (registry_ != nullptr) {
    Status s = registry_->set_base_state(name, BaseModelState::kRetired);
    if (!s.is_ok() && s.code() != StatusCode::kNotFound) return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it->second.base) graveyard_.push_back(std::move(it->second.base));
  entries_.erase(it);
  changed_.notify_all();
  return Status::ok();
}

void BaseSet::reaper_main() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (graveyard_.empty() && !stopping_) {
      changed_.wait(lock, [&] { return stopping_ || !graveyard_.empty(); });
    } else if (!stopping_) {
      changed_.wait_for(lock, std::chrono::milliseconds(50));  // a request still holds one
    }
    // Only the graveyard holds it: no request can reach it any more.
    std::vector<std::shared_ptr<ServingBase>> dead;
    for (auto it = graveyard_.begin(); it != graveyard_.end();) {
      if (stopping_ || it->use_count() == 1) {
        freeing_bytes_ += (*it)->memory_bytes();  // still counted by the budget until freed below
        dead.push_back(std::move(*it));
        it = graveyard_.erase(it);
      } else {
        ++it;
      }
    }
    const bool stop = stopping_;
    lock.unlock();
    if (!dead.empty()) {
      dead.clear();  // joins the loop threads and frees weights and KV: outside the lock
#ifdef __GLIBC__
      // Per-layer buffers below glibc's mmap threshold come from arenas that
      // keep freed pages; trimming gives them back so RSS really drops.
      malloc_trim(0);
#endif
    }
    lock.lock();
    freeing_bytes_ = 0;
    if (stop) return;
  }
}

// --- swapping -----------------------------------------------------------------------

Result<SwapRecord> BaseSet::promote(const std::string& name, bool force, const std::string& actor) {
  std::lock_guard<std::mutex> admin(admin_mu_);
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> target, find(name));
  std::string from;
  {
    std::lock_guard<std::mutex> lock(mu_);
    from = serving_name_;
  }
  if (from == name) return Status::failed_precondition("base '" + name + "' is serving already");
  const std::shared_ptr<ServingBase> current = serving();
  const std::vector<std::string> missing = current ? missing_on(registry_, *current, *target) : std::vector<std::string>();
  if (!missing.empty() && !force) {
    return Status::failed_precondition("cannot promote '" + name + "': the serving base '" + from + "' has " +
                                       joined(missing) + " with no version on '" + name +
                                       "'; register them on '" + name + "' or promote with force");
  }
  // What a forced promote overrode, recorded with the swap.
  std::vector<std::string> overrode;
  if (!missing.empty()) overrode.push_back("missing on '" + name + "': " + joined(missing));
  if (promote_check_ && current) {
    Result<std::vector<std::string>> reasons = promote_check_(*current, *target);
    if (!reasons.is_ok()) {
      if (!force) return reasons.status();
      overrode.push_back(reasons.status().message());
    } else if (!reasons->empty()) {
      if (!force) {
        return Status::failed_precondition("cannot promote '" + name + "' over '" + from + "': " +
                                           joined(*reasons, "; ") + "; evaluate again or promote with force");
      }
      overrode.insert(overrode.end(), reasons->begin(), reasons->end());
    }
  }
  const std::string note = joined(overrode, "; ");
  return swap_to(name, "promote", force && !note.empty(), note, actor);
}

void BaseSet::set_promote_check(PromoteCheck check) {
  std::lock_guard<std::mutex> admin(admin_mu_);
  promote_check_ = std::move(check);
}

bool BaseSet::has_promote_check() {
  std::lock_guard<std::mutex> admin(admin_mu_);
  return static_cast<bool>(promote_check_);
}

Result<std::vector<std::string>> BaseSet::promotion_blockers(const std::string& name) {
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> target, find(name));
  const std::shared_ptr<ServingBase> current = serving();
  if (current == nullptr) return std::vector<std::string>{"no base is serving"};
  if (current == target) return std::vector<std::string>{"base '" + name + "' is serving already"};
  std::vector<std::string> blockers;
  for (const std::string& m : missing_on(registry_, *current, *target)) {
    blockers.push_back(m + " of the serving base '" + current->name() + "' has no version on '" + name + "'");
  }
  PromoteCheck check;
  {
    std::lock_guard<std::mutex> admin(admin_mu_);
    check = promote_check_;
  }
  if (check) {  // outside the admin lock: it reads the history, and a listing must not hold up a promote
    LG_ASSIGN_OR_RETURN(std::vector<std::string> reasons, check(*current, *target));
    blockers.insert(blockers.end(), reasons.begin(), reasons.end());
  }
  return blockers;
}

Result<SwapRecord> BaseSet::rollback(const std::string& actor) {
  std::lock_guard<std::mutex> admin(admin_mu_);
  std::string previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [n, e] : entries_) {
      if (e.state == BaseState::kPrevious) previous = n;
    }
  }
  if (previous.empty()) return Status::failed_precondition("no previous base is loaded to roll back to");
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> target, find(previous));
  const std::shared_ptr<ServingBase> current = serving();
  const std::vector<std::string> missing = current ? missing_on(registry_, *current, *target) : std::vector<std::string>();
  return swap_to(previous, "rollback", /*forced=*/false,
                 missing.empty() ? "" : "missing on '" + previous + "': " + joined(missing), actor);
}

// The caller holds admin_mu_. The registry commits first: a crash before it
// leaves the old base serving, after it the new one, never neither or both.
Result<SwapRecord> BaseSet::swap_to(const std::string& name, const std::string& kind, bool forced,
                                    const std::string& note, const std::string& actor) {
  SwapRecord swap;
  swap.actor = actor.empty() ? "admin" : actor;
  swap.to_base = name;
  swap.kind = kind;
  swap.forced = forced;
  swap.note = note;
  {
    std::lock_guard<std::mutex> lock(mu_);
    swap.from_base = serving_name_;
  }
  if (registry_ != nullptr) {
    LG_ASSIGN_OR_RETURN(swap, registry_->record_swap(swap));
  } else {
    swap.at = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count();
  }
  switch_serving(name, kind);
  return swap;
}

Status BaseSet::follow(const std::string& name, const std::string& kind) {
  std::lock_guard<std::mutex> admin(admin_mu_);
  LG_RETURN_IF_ERROR(find(name).status());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (serving_name_ == name) return Status::ok();
  }
  switch_serving(name, kind);
  return Status::ok();
}

// The caller holds admin_mu_ and found `name` loaded.
void BaseSet::switch_serving(const std::string& name, const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [n, e] : entries_) {
    if (e.state == BaseState::kPrevious) e.state = BaseState::kCandidate;
  }
  if (auto old = entries_.find(serving_name_); old != entries_.end()) {
    old->second.state = BaseState::kPrevious;
    old->second.base->loop().set_serving(false);
  }
  Entry& next = entries_.at(name);
  next.state = BaseState::kServing;
  next.base->loop().set_serving(true);
  serving_name_ = name;
  serving_.store(next.base);  // from here every new request captures it
  ++swaps_[kind];
  changed_.notify_all();
}

// --- reading --------------------------------------------------------------------------

Result<std::shared_ptr<ServingBase>> BaseSet::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return Status::not_found("base '" + name + "' is not loaded (see GET /admin/bases)");
  if (it->second.state == BaseState::kLoading) {
    return Status::failed_precondition("base '" + name + "' is still loading");
  }
  if (it->second.state == BaseState::kFailed) {
    return Status::failed_precondition("base '" + name + "' failed to load: " + it->second.error);
  }
  return it->second.base;
}

std::vector<BaseStatus> BaseSet::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BaseStatus> out;
  for (const auto& [name, e] : entries_) {
    BaseStatus s;
    s.name = name;
    s.path = e.spec.path;
    s.dtype = std::string(weight_type_name(e.spec.dtype));
    s.state = e.state;
    s.error = e.error;
    if (e.base) {
      const MemoryEstimate m = e.base->loop().memory();
      s.sha256 = e.base->sha256();
      s.fingerprint = e.base->fingerprint();
      s.weights_bytes = m.weights_bytes;
      s.kv_bytes = m.kv_bytes;
      s.adapter_bytes = m.lora_slot_bytes + e.base->adapters()->stats().host_bytes;
      s.in_flight = e.base->in_flight();
      for (const AdapterInfo& a : e.base->adapters()->list()) s.adapters.push_back(a.name);
      if (s.state == BaseState::kPrevious && s.in_flight > 0) s.state = BaseState::kDraining;
    } else {
      s.weights_bytes = e.estimate.weights_bytes;
      s.kv_bytes = e.estimate.kv_bytes;
      s.adapter_bytes = e.estimate.lora_slot_bytes;
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool BaseSet::wait_loaded(const std::string& name, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_until(lock, deadline, [&] {
    auto it = entries_.find(name);
    return it != entries_.end() && it->second.state != BaseState::kLoading;
  });
}

int64_t BaseSet::swaps_total(const std::string& kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = swaps_.find(kind);
  return it == swaps_.end() ? 0 : it->second;
}

}  // namespace loragate

#include "adapters/adapter_cache.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "adapters/adapter_dir.h"

namespace loragate {
namespace {

// What a client hears about an adapter that does not load: its name and whether
// waiting helps, never its files. Missing or unreadable files may come back.
Status unservable(const std::string& name, const Status& load_error) {
  const bool transient = load_error.code() == StatusCode::kNotFound || load_error.code() == StatusCode::kIoError;
  return Status::unavailable(transient ? "adapter '" + name +
                                             "' cannot be loaded right now (its files are missing or unreadable); "
                                             "retry later"
                                       : "adapter '" + name + "' is broken and cannot be served until an operator "
                                                              "replaces it");
}

}  // namespace

const char* adapter_tier_name(AdapterTier t) {
  switch (t) {
    case AdapterTier::kDisk: return "disk";
    case AdapterTier::kLoading: return "loading";
    case AdapterTier::kHost: return "host";
    case AdapterTier::kSlot: return "slot";
    case AdapterTier::kFailed: return "failed";
  }
  return "disk";
}

AdapterCache::AdapterCache(const ModelConfig& base, AdapterCacheOptions options,
                           std::unique_ptr<LoraSlotStore> slots)
    : base_(base),
      options_(options),
      slot_owner_(static_cast<size_t>(options.max_loras)),
      slot_pins_(static_cast<size_t>(options.max_loras), 0),
      slots_(slots != nullptr ? std::move(slots)
                              : std::make_unique<LoraSlots>(base, options.max_loras, options.max_rank)),
      slot_kv_identity_(static_cast<size_t>(options.max_loras)) {
  loader_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "lg-adapter-load");
    loader_main();
  });
}

AdapterCache::~AdapterCache() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  loader_.join();
}

Status AdapterCache::add(const std::string& name, const std::string& path, const std::string& sha256) {
  if (name.empty()) return Status::invalid_argument("an adapter needs a name");
  std::string confined_to = adapter_confinement_for(path);  // the disk, before the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it != entries_.end() && !it->second.removed) {
    return Status::already_exists("adapter '" + name + "' is already registered");
  }
  if (it != entries_.end()) return Status::failed_precondition("adapter '" + name + "' is still being removed; retry");
  Entry& e = entries_[name];
  e.path = path;
  e.confined_to = std::move(confined_to);
  e.sha256 = sha256;
  return Status::ok();
}

Status AdapterCache::check_identity(const std::string& name, Entry& e, const LoraAdapter& loaded) {
  if (e.sha256.empty()) {
    e.sha256 = loaded.weights_sha256();
    return Status::ok();
  }
  if (loaded.weights_sha256() == e.sha256) return Status::ok();
  return Status::corrupt("adapter '" + name + "': " + e.path +
                         "/adapter_model.safetensors changed since it was registered (sha256 " +
                         loaded.weights_sha256() + ", registered " + e.sha256 +
                         "); register the new weights under a new name, or restore the file");
}

Status AdapterCache::load_now(const std::string& name) {
  std::string path, confined_to;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // One load at a time per adapter: a second would count its bytes twice and list it twice in the LRU.
    bool waited = false;
    loaded_.wait(lock, [&] {
      auto e = entries_.find(name);
      if (e == entries_.end() || !e->second.loading) return true;
      waited = true;
      return false;
    });
    auto it = entries_.find(name);
    if (it == entries_.end() || it->second.removed) return Status::not_found("adapter '" + name + "' is not registered");
    if (it->second.host) return Status::ok();
    if (waited && !it->second.error.is_ok()) return it->second.error;  // the load it waited for failed
    it->second.loading = true;
    path = it->second.path;
    confined_to = it->second.confined_to;
  }
  const auto start = std::chrono::steady_clock::now();
  Result<std::shared_ptr<const LoraAdapter>> loaded = LoraAdapter::load(path, base_, options_.max_rank, confined_to);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it != entries_.end()) it->second.loading = false;
  loaded_.notify_all();
  if (loaded.is_ok() && it != entries_.end()) {
    if (Status same = check_identity(name, it->second, **loaded); !same.is_ok()) loaded = same;
  }
  if (!loaded.is_ok()) {
    if (it != entries_.end()) record_failure_locked(name, it->second, loaded.status());
    return loaded.status();  // to the operator registering it: the whole story
  }
  ++stats_.loads;
  stats_.load_ms_total += ms;
  if (it != entries_.end() && !it->second.host) {
    it->second.host = std::move(loaded).value();
    it->second.error = Status::ok();
    stats_.host_bytes += static_cast<int64_t>(it->second.host->bytes());
    host_lru_.push_back(name);
    evict_host_locked();
  }
  return Status::ok();
}

Status AdapterCache::remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.removed) return Status::not_found("adapter '" + name + "' is not registered");
  it->second.removed = true;
  return Status::ok();
}

Status AdapterCache::hold(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.removed) return Status::not_found("adapter '" + name + "' is not registered");
  ++it->second.holds;
  return Status::ok();
}

void AdapterCache::unhold(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.holds > 0) --it->second.holds;
}

bool AdapterCache::contains(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  return it != entries_.end() && !it->second.removed;
}

std::vector<AdapterInfo> AdapterCache::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::lock_guard<std::mutex> slot_lock(slot_mu_);
  std::vector<AdapterInfo> out;
  for (const auto& [name, e] : entries_) {
    if (e.removed) continue;
    AdapterInfo info;
    info.name = name;
    info.path = e.path;
    info.tier = slot_of_.count(name) != 0 ? AdapterTier::kSlot
                : e.host   ? AdapterTier::kHost
                : e.loading ? AdapterTier::kLoading
                : !e.error.is_ok() ? AdapterTier::kFailed
                                   : AdapterTier::kDisk;
    if (e.host) {
      info.rank = e.host->max_rank();
      info.alpha = e.host->config().lora_alpha();
      info.bytes = e.host->bytes();
      for (LoraModule m : kAllLoraModules) {
        for (int64_t l = 0; l < e.host->num_layers(); ++l) {
          if (e.host->weights(l, m) != nullptr) {
            info.target_modules.emplace_back(lora_module_name(m));
            break;
          }
        }
      }
    }
    info.sha256 = e.sha256;
    info.error = e.error.is_ok() ? "" : e.error.message();
    out.push_back(std::move(info));
  }
  return out;
}

AdapterCacheStats AdapterCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::lock_guard<std::mutex> slot_lock(slot_mu_);
  AdapterCacheStats s = stats_;
  s.slot_hits = slot_hits_;
  s.host_hits = host_hits_;
  s.slot_evictions = slot_evictions_;
  s.slots_used = static_cast<int32_t>(std::count_if(slot_owner_.begin(), slot_owner_.end(),
                                                    [](const std::string& o) { return !o.empty(); }));
  s.slots_pinned = static_cast<int32_t>(std::count_if(slot_pins_.begin(), slot_pins_.end(), [](int32_t p) { return p > 0; }));
  return s;
}

std::vector<std::string> AdapterCache::running() const {
  std::lock_guard<std::mutex> slot_lock(slot_mu_);
  std::vector<std::string> out;
  for (const auto& [name, slot] : slot_of_) {
    if (slot_pins_[slot] > 0) out.push_back(name);
  }
  return out;
}

std::vector<std::string> AdapterCache::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::lock_guard<std::mutex> slot_lock(slot_mu_);
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) {
    if (e.holds > 0 && !pinned_locked(name)) out.push_back(name);
  }
  return out;
}

bool AdapterCache::pinned_locked(const std::string& name) const {
  auto it = slot_of_.find(name);
  return it != slot_of_.end() && slot_pins_[it->second] > 0;
}

AdapterCache::AcquireResult AdapterCache::acquire(const std::string& name) {
  {
    std::lock_guard<std::mutex> slot_lock(slot_mu_);
    if (auto it = slot_of_.find(name); it != slot_of_.end()) {
      const int32_t slot = it->second;
      ++slot_pins_[slot];
      slot_lru_.remove(slot);
      slot_lru_.push_back(slot);
      ++slot_hits_;
      return {Acquire::kReady, slot, Status::ok()};
    }
  }
  std::shared_ptr<const LoraAdapter> host;  // keeps the weights alive through the copy, evicted or not
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      return {Acquire::kFailed, -1, Status::not_found("adapter '" + name + "' is not registered")};
    }
    Entry& e = it->second;  // a removed entry still serves the requests holding it
    if (!e.host) {
      if (!e.error.is_ok() && !e.loading && std::chrono::steady_clock::now() < e.retry_at) {
        return {Acquire::kFailed, -1, unservable(name, e.error)};
      }
      if (!e.loading) {
        e.loading = true;
        load_queue_.push_back(name);
        ++stats_.misses;
        work_.notify_one();
      }
      return {Acquire::kWaitLoad, -1, Status::ok()};
    }
    host = e.host;
    host_lru_.remove(name);
    host_lru_.push_back(name);
  }
  int32_t slot = -1;
  bool evicted = false;
  {
    std::lock_guard<std::mutex> slot_lock(slot_mu_);
    slot = take_slot_locked(&evicted);
    if (slot < 0) return {Acquire::kWaitSlot, -1, Status::ok()};
  }
  // Only this thread changes the table: the slot stays free (unowned) while
  // it is written, with no lock held.
  if (evicted) slots_->reset(slot);
  slots_->set(slot, *host);
  slot_kv_identity_[slot] = host->kv_identity();
  std::lock_guard<std::mutex> slot_lock(slot_mu_);
  slot_owner_[slot] = name;
  slot_pins_[slot] = 1;
  slot_lru_.push_back(slot);
  slot_of_[name] = slot;
  ++host_hits_;
  return {Acquire::kReady, slot, Status::ok()};
}

int32_t AdapterCache::take_slot_locked(bool* evicted) {
  *evicted = false;
  for (int32_t s = 0; s < static_cast<int32_t>(slot_owner_.size()); ++s) {
    if (slot_owner_[s].empty()) return s;
  }
  for (int32_t s : slot_lru_) {  // least recently used unpinned slot
    if (slot_pins_[s] > 0) continue;
    slot_of_.erase(slot_owner_[s]);
    slot_lru_.remove(s);
    slot_owner_[s].clear();
    ++slot_evictions_;
    *evicted = true;
    return s;
  }
  return -1;
}

void AdapterCache::release(int32_t slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> slot_lock(slot_mu_);
  if (slot_pins_[slot] > 0) --slot_pins_[slot];
}

void AdapterCache::collect_removed() {
  std::vector<int32_t> freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> slot_lock(slot_mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& e = it->second;
      if (!e.removed || pinned_locked(it->first) || e.loading || e.holds > 0) {
        ++it;
        continue;
      }
      if (auto slot = slot_of_.find(it->first); slot != slot_of_.end()) {
        slot_owner_[slot->second].clear();
        slot_lru_.remove(slot->second);
        freed.push_back(slot->second);
        slot_of_.erase(slot);
      }
      if (e.host) stats_.host_bytes -= static_cast<int64_t>(e.host->bytes());
      host_lru_.remove(it->first);
      it = entries_.erase(it);
    }
  }
  for (int32_t slot : freed) slots_->reset(slot);  // this thread alone takes slots: still free here
}

void AdapterCache::record_failure_locked(const std::string& name, Entry& e, const Status& error) {
  ++stats_.load_failures;
  e.error = error;
  e.retry_at = std::chrono::steady_clock::now() + options_.retry_after_failure;
  // The paths go to the server's log, not to clients.
  std::fprintf(stderr, "loragate: adapter '%s' does not load (tried again in %lld ms at the earliest): %s\n",
               name.c_str(), static_cast<long long>(options_.retry_after_failure.count()), error.to_string().c_str());
}

void AdapterCache::evict_host_locked() {
  // Oldest first; an adapter in a slot keeps working from the slot's copy.
  for (auto it = host_lru_.begin(); it != host_lru_.end() && stats_.host_bytes > options_.host_budget_bytes;) {
    Entry& e = entries_[*it];
    if (e.host && host_lru_.size() > 1) {
      stats_.host_bytes -= static_cast<int64_t>(e.host->bytes());
      e.host.reset();
      ++stats_.host_evictions;
      it = host_lru_.erase(it);
    } else {
      ++it;
    }
  }
}

void AdapterCache::loader_main() {
  for (;;) {
    std::string name, path, confined_to;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [&] { return stopping_ || !load_queue_.empty(); });
      if (stopping_) return;
      name = load_queue_.front();
      load_queue_.pop_front();
      path = entries_[name].path;
      confined_to = entries_[name].confined_to;
    }
    const auto start = std::chrono::steady_clock::now();
    Result<std::shared_ptr<const LoraAdapter>> loaded = LoraAdapter::load(path, base_, options_.max_rank, confined_to);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) continue;
    Entry& e = it->second;
    e.loading = false;
    loaded_.notify_all();
    if (loaded.is_ok()) {
      if (Status same = check_identity(name, e, **loaded); !same.is_ok()) loaded = same;
    }
    if (!loaded.is_ok()) {
      record_failure_locked(name, e, loaded.status());
      continue;
    }
    ++stats_.loads;
    stats_.load_ms_total += ms;
    e.error = Status::ok();
    e.host = std::move(loaded).value();
    stats_.host_bytes += static_cast<int64_t>(e.host->bytes());
    host_lru_.push_back(name);
    evict_host_locked();
  }
}

}  // namespace loragate

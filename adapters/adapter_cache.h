// AdapterCache: the three tiers one engine's LoRA adapters live in.
//
//   disk   -> registered name -> directory (add/remove); every file a load
//             opens must lie inside the directory as registered (AdapterDir)
//   host   -> loaded, validated adapters, LRU-evicted past a byte budget
//   slots  -> the engine's preallocated slot store (host or device memory,
//             as its model runner made it); a slot is pinned while a
//             running sequence uses it and is never evicted then
//
// Loads run on a loader thread: the step loop never waits on disk. acquire()
// either pins a slot or says why the caller must wait (loading, or every
// slot pinned). A load that fails is retried after a short backoff, not
// cached for good (the files may come back); meanwhile requests are refused
// with a Status that names the adapter, never its paths (the full error is
// logged and listed by list()).
//
// Thread-safety: add/remove/hold/unhold/contains/stats/list/running/waiting
// may be called from any thread; acquire/release/collect_removed and slots()
// belong to the engine's step thread. Two locks, never held across a copy:
// mu_ guards the registration and host tier (entries, loads, host LRU);
// slot_mu_ guards the slot table, which only the step thread changes (other
// threads read it for list/stats). Copying an adapter into a slot (every
// layer, transposed; a device upload on GPU) runs with neither held, so the
// gateway's per-request contains() and registrations never wait behind it.
// Lock order: mu_ before slot_mu_.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "adapters/adapter_catalog.h"
#include "adapters/lora_adapter.h"
#include "adapters/lora_slots.h"
#include "common/status.h"
#include "model/model_config.h"

namespace loragate {

struct AdapterCacheOptions {
  int32_t max_loras = kDefaultMaxLoras;                  // slots usable in one step
  int32_t max_rank = kDefaultMaxLoraRank;                // largest adapter rank accepted
  int64_t host_budget_bytes = kDefaultAdapterHostBytes;  // loaded adapters kept in host memory
  std::chrono::milliseconds retry_after_failure{1000};  // a failed load is tried again no sooner
};

class AdapterCache final : public AdapterCatalog {
 public:
  // `slots`: the store its runner made, of options.max_loras slots of
  // options.max_rank; null makes host LoraSlots (tests, the CPU default).
  AdapterCache(const ModelConfig& base, AdapterCacheOptions options, std::unique_ptr<LoraSlotStore> slots = nullptr);
  ~AdapterCache();
  AdapterCache(const AdapterCache&) = delete;
  AdapterCache& operator=(const AdapterCache&) = delete;

  // --- any thread (AdapterCatalog) -----------------------------------------
  Status add(const std::string& name, const std::string& path, const std::string& sha256 = "") override;
  Status load_now(const std::string& name) override;
  // Its slot and memory are freed once the last hold is dropped (at the next collect_removed).
  Status remove(const std::string& name) override;
  bool contains(const std::string& name) const override;
  std::vector<AdapterInfo> list() const override;
  AdapterCacheStats stats() const override;
  std::vector<std::string> running() const override;
  std::vector<std::string> waiting() const override;
  // An accepted request holds its adapter until it ends, so removal waits for
  // it. Fails when `name` is not registered or is being removed.
  Status hold(const std::string& name);
  void unhold(const std::string& name);
  const AdapterCacheOptions& options() const { return options_; }

  // --- step thread ---------------------------------------------------------
  enum class Acquire { kReady, kWaitLoad, kWaitSlot, kFailed };
  struct AcquireResult {
    Acquire state = Acquire::kFailed;
    int32_t slot = -1;
    Status error;  // with kFailed; safe to show any client
  };
  // Pins a slot holding `name`, loading or evicting as needed.
  AcquireResult acquire(const std::string& name);
  // Unpins a slot acquired before.
  void release(int32_t slot);
  // Frees the unpinned slots of removed adapters and forgets them.
  void collect_removed();
  const LoraSlotStore& slots() const { return *slots_; }
  // The kv_identity() of the adapter in an acquired slot (prefix-cache keys).
  const std::string& slot_kv_identity(int32_t slot) const { return slot_kv_identity_[slot]; }

 private:
  struct Entry {
    std::string path;
    std::shared_ptr<const LoraAdapter> host;  // null until loaded (or after eviction)
    bool loading = false;
    bool removed = false;
    int64_t holds = 0;                         // accepted requests not yet ended
    std::string confined_to;                   // its files must lie inside (AdapterDir)
    std::string sha256;                        // the weights' identity; "" until known
    Status error;                              // last load failure, paths included
    std::chrono::steady_clock::time_point retry_at;  // after a failure, no new load before this
  };
  void loader_main();
  void record_failure_locked(const std::string& name, Entry& e, const Status& error);
  // ok when `loaded` has the entry's identity (or fixes it, the first time).
  static Status check_identity(const std::string& name, Entry& e, const LoraAdapter& loaded);
  void evict_host_locked();
  // A free slot, else the least recently used unpinned one, unmapped from its
  // owner (*evicted set); -1 when every slot is pinned. With slot_mu_ held.
  int32_t take_slot_locked(bool* evicted);
  bool pinned_locked(const std::string& name) const;  // with slot_mu_ held

  const ModelConfig base_;
  const AdapterCacheOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_;
  std::condition_variable loaded_;                // a load (loader thread or load_now) ended
  std::map<std::string, Entry> entries_;          // guarded by mu_
  std::list<std::string> host_lru_;               // guarded by mu_; most recent at the back
  std::deque<std::string> load_queue_;            // guarded by mu_
  AdapterCacheStats stats_;                       // guarded by mu_ (the slot counters below excepted)
  bool stopping_ = false;                         // guarded by mu_
  // The slot table: changed only on the step thread, under slot_mu_.
  mutable std::mutex slot_mu_;
  std::map<std::string, int32_t> slot_of_;        // guarded by slot_mu_; adapter -> its slot
  std::vector<std::string> slot_owner_;           // guarded by slot_mu_; "" = free
  std::vector<int32_t> slot_pins_;                // guarded by slot_mu_
  std::list<int32_t> slot_lru_;                   // guarded by slot_mu_; most recent at the back
  int64_t slot_hits_ = 0, host_hits_ = 0, slot_evictions_ = 0;  // guarded by slot_mu_
  std::unique_ptr<LoraSlotStore> slots_;          // written only on the step thread, with no lock held
  std::vector<std::string> slot_kv_identity_;     // step thread only: what each slot was last set to
  std::thread loader_;
};

}  // namespace loragate

// AdapterCatalog: one engine's adapters as the rooms above the engine see
// them — register, validate, remove, look up, list, count. AdapterCache
// (adapter_cache.h) is the implementation; its slots and the step thread's
// side stay behind this interface, so a gateway that registers adapters
// never includes the kernels the slots are computed with.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace loragate {

// The defaults, defined once: EngineOptions (engine.max_loras and friends) takes them from here.
inline constexpr int32_t kDefaultMaxLoras = 4;                // adapter slots usable in one step
inline constexpr int32_t kDefaultMaxLoraRank = 16;            // largest adapter rank accepted (slot size)
inline constexpr int64_t kDefaultAdapterHostBytes = 2ll << 30;  // loaded adapters kept in host memory

struct AdapterCacheStats {
  int64_t slot_hits = 0;      // acquire found the adapter in a slot
  int64_t host_hits = 0;      // acquire copied it into a slot from host memory
  int64_t misses = 0;         // acquire had to start a load from disk
  int64_t loads = 0;          // loads completed
  int64_t load_failures = 0;
  int64_t host_evictions = 0;
  int64_t slot_evictions = 0;
  double load_ms_total = 0;   // time spent loading from disk
  int64_t host_bytes = 0;
  int32_t slots_used = 0;     // slots holding an adapter
  int32_t slots_pinned = 0;   // slots in use by running sequences
};

enum class AdapterTier { kDisk, kLoading, kHost, kSlot, kFailed };
const char* adapter_tier_name(AdapterTier t);  // "disk", "loading", "host", "slot", "failed"

struct AdapterInfo {
  std::string name, path;
  AdapterTier tier = AdapterTier::kDisk;
  int64_t rank = 0;          // largest rank; 0 until loaded
  double alpha = 0;          // lora_alpha; 0 until loaded
  std::vector<std::string> target_modules;  // e.g. {"q_proj", "v_proj"}; empty until loaded
  size_t bytes = 0;          // 0 until loaded
  std::string sha256;        // of adapter_model.safetensors: as registered, else as first loaded; "" until then
  std::string error;         // why the last load failed (with paths: for operators only)
};

class AdapterCatalog {
 public:
  virtual ~AdapterCatalog() = default;

  // Registers `name` for the adapter in `path` (not loaded yet); its files
  // are confined to the directory `path` resolves to now. Every load must
  // find adapter_model.safetensors with the SHA-256 `sha256` (hex), or, when
  // that is "", the one the first successful load found: weights changed on
  // disk since are refused (corrupt), never served under the old name. Fails
  // with already_exists when the name is taken.
  virtual Status add(const std::string& name, const std::string& path, const std::string& sha256 = "") = 0;
  // Loads now, on the caller's thread, and keeps the result in host memory:
  // used to validate an adapter before accepting its registration.
  virtual Status load_now(const std::string& name) = 0;
  // New requests for `name` are refused from now on; requests already
  // holding it still run, and its memory is freed after the last one ends.
  virtual Status remove(const std::string& name) = 0;
  virtual bool contains(const std::string& name) const = 0;
  virtual std::vector<AdapterInfo> list() const = 0;
  virtual AdapterCacheStats stats() const = 0;
  // Adapters running (a sequence pins their slot) and waiting (held by
  // accepted requests with no slot yet), by name.
  virtual std::vector<std::string> running() const = 0;
  virtual std::vector<std::string> waiting() const = 0;
};

}  // namespace loragate

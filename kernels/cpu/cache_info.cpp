#include "kernels/cpu/cache_info.h"

#include <cpuid.h>
#include <unistd.h>

#include <cstring>

namespace loragate::cpu {
namespace {

// Walks a deterministic cache-parameters leaf (Intel 4, AMD 0x8000001D: the
// same format) and fills the L1 data and L2 sizes it lists.
void read_cache_leaf(unsigned leaf, CacheSizes& out) {
  for (unsigned i = 0; i < 16; ++i) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    __cpuid_count(leaf, i, a, b, c, d);
    const unsigned type = a & 31u, level = (a >> 5) & 7u;
    if (type == 0) break;  // no more caches
    const int64_t bytes = int64_t{((b >> 22) & 1023u) + 1} * (((b >> 12) & 1023u) + 1) * ((b & 4095u) + 1) * (int64_t{c} + 1);
    if (level == 1 && type == 1) out.l1d = bytes;         // data
    if (level == 2 && (type == 3 || type == 1)) out.l2 = bytes;  // unified (or data)
  }
}

CacheSizes read_cache_sizes() {
  CacheSizes s;
  unsigned a = 0, b = 0, c = 0, d = 0;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  __cpuid(0, a, b, c, d);
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  const unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (std::strcmp(vendor, "GenuineIntel") == 0 && max_leaf >= 4) {
    read_cache_leaf(4, s);
  } else if (std::strcmp(vendor, "AuthenticAMD") == 0 || std::strcmp(vendor, "HygonGenuine") == 0) {
    if (max_ext >= 0x8000001Du) read_cache_leaf(0x8000001Du, s);
    if (s.l1d == 0 && max_ext >= 0x80000005u) {
      __cpuid(0x80000005u, a, b, c, d);
      s.l1d = int64_t{c >> 24} * 1024;
    }
    if (s.l2 == 0 && max_ext >= 0x80000006u) {
      __cpuid(0x80000006u, a, b, c, d);
      s.l2 = int64_t{c >> 16} * 1024;
    }
  }
  if (s.l1d <= 0) s.l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  if (s.l2 <= 0) s.l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (s.l1d <= 0) s.l1d = 32 * 1024;
  if (s.l2 <= 0) s.l2 = 256 * 1024;
  return s;
}

}  // namespace

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = read_cache_sizes();
  return sizes;
}

}  // namespace loragate::cpu

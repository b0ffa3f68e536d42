// The data cache sizes of one core, read once from cpuid, which the kernels'
// blocking is sized by: a Zen 3 core has 512 KiB of L2, a Sapphire Rapids
// core 2 MiB, a Skylake client core 256 KiB, so no one constant fits them all.
#pragma once

#include <cstdint>

namespace loragate::cpu {

struct CacheSizes {
  int64_t l1d = 0;  // bytes per core
  int64_t l2 = 0;
};

// Intel: cpuid leaf 4; AMD: leaf 0x8000001D (or, on older parts, 0x80000005
// and 0x80000006). Where cpuid says nothing usable, sysconf, then 32 KiB and
// 256 KiB (the smallest of the x86-64 CPUs the AVX2 kernels target).
const CacheSizes& cache_sizes();

}  // namespace loragate::cpu

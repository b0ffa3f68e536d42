// cache_sizes(): what cpuid says of this core's caches is plausible for an
// x86-64 core and agrees with glibc's view (which reads cpuid too).
#include <gtest/gtest.h>
#include <unistd.h>

#include "kernels/cpu/cache_info.h"

namespace loragate::cpu {
namespace {

TEST(CacheInfo, SizesArePlausible) {
  const CacheSizes& s = cache_sizes();
  EXPECT_GE(s.l1d, 16 * 1024);
  EXPECT_LE(s.l1d, 1024 * 1024);
  EXPECT_GE(s.l2, 128 * 1024);
  EXPECT_LE(s.l2, 64 * 1024 * 1024);
  EXPECT_GT(s.l2, s.l1d);
}

TEST(CacheInfo, AgreesWithGlibc) {
  const long l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l1d <= 0 || l2 <= 0) GTEST_SKIP() << "glibc reports no cache sizes here";
  EXPECT_EQ(cache_sizes().l1d, l1d);
  EXPECT_EQ(cache_sizes().l2, l2);
}

}  // namespace
}  // namespace loragate::cpu

// LORAGATE_ISA: which values force a path and which are refused, by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu/isa.h"

namespace loragate::cpu {
namespace {

// Sets LORAGATE_ISA for one scope and restores what was there.
class ScopedIsaEnv {
 public:
  explicit ScopedIsaEnv(const char* value) {
    if (const char* old = std::getenv("LORAGATE_ISA")) old_ = old, had_ = true;
    if (value) setenv("LORAGATE_ISA", value, 1); else unsetenv("LORAGATE_ISA");
  }
  ~ScopedIsaEnv() {
    if (had_) setenv("LORAGATE_ISA", old_.c_str(), 1); else unsetenv("LORAGATE_ISA");
  }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(Isa, SupportedIsasAreOrderedAndIncludeScalar) {
  const std::vector<Isa> isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kScalar);
  for (size_t i = 1; i < isas.size(); ++i) EXPECT_LT(static_cast<int>(isas[i - 1]), static_cast<int>(isas[i]));
  for (Isa isa : isas) EXPECT_TRUE(cpu_supports(isa)) << isa_name(isa);
}

TEST(Isa, UnsetMeansTheCpusBest) {
  ScopedIsaEnv env(nullptr);
  auto isa = isa_from_env();
  ASSERT_TRUE(isa.is_ok());
  EXPECT_EQ(*isa, supported_isas().back());
}

TEST(Isa, EverySupportedIsaCanBeForced) {
  for (Isa want : supported_isas()) {
    ScopedIsaEnv env(isa_name(want));
    auto isa = isa_from_env();
    ASSERT_TRUE(isa.is_ok()) << isa.status().to_string();
    EXPECT_EQ(*isa, want);
  }
}

TEST(Isa, UnknownValueIsRefusedByName) {
  ScopedIsaEnv env("avx1024");
  auto isa = isa_from_env();
  ASSERT_FALSE(isa.is_ok());
  EXPECT_NE(isa.status().message().find("LORAGATE_ISA=avx1024"), std::string::npos) << isa.status().message();
  EXPECT_NE(isa.status().message().find("expected avx512, avx2 or scalar"), std::string::npos);
}

TEST(Isa, AnIsaTheCpuLacksIsRefused) {
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (cpu_supports(isa)) continue;
    ScopedIsaEnv env(isa_name(isa));
    auto got = isa_from_env();
    ASSERT_FALSE(got.is_ok());
    EXPECT_NE(got.status().message().find("lacks"), std::string::npos) << got.status().message();
    return;
  }
  GTEST_SKIP() << "this CPU runs every ISA the kernels have";
}

TEST(Isa, TheActiveIsaIsSupported) { EXPECT_TRUE(cpu_supports(best_isa())) << isa_name(best_isa()); }

}  // namespace
}  // namespace loragate::cpu

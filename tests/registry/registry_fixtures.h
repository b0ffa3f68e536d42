// Helpers shared by the registry tests: a temp directory per test, sample
// records (base models, adapters, swaps), and message checks.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "registry/records.h"
#include "common/sha256.h"
#include "tests/test_util.h"

// Expects `status` to carry `code` and a message containing `text`.
#define EXPECT_STATUS(status_expr, code_value, text)                                    \
  do {                                                                                  \
    const ::loragate::Status st_ = (status_expr);                                       \
    EXPECT_EQ(st_.code(), (code_value)) << st_.to_string();                             \
    EXPECT_NE(st_.message().find(text), std::string::npos)                              \
        << "message lacks \"" << (text) << "\": " << st_.to_string();                   \
  } while (0)

#define ASSERT_OK(expr)                                          \
  do {                                                           \
    const ::loragate::Status st_ = (expr);                       \
    ASSERT_TRUE(st_.is_ok()) << st_.to_string();                 \
  } while (0)

namespace loragate::testing {

// A fresh directory for each test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("lg-registry");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

// prefix + n, built by appends: GCC 12 misreports "x" + std::to_string(n)
// as an overlapping memcpy (-Wrestrict).
inline std::string numbered(std::string_view prefix, int64_t n) {
  std::string out(prefix);
  out += std::to_string(n);
  return out;
}

inline BaseModelRecord base_model(const std::string& name,
                                  BaseModelState state = BaseModelState::kServing) {
  BaseModelRecord r;
  r.name = name;
  r.path = "/models/" + name;
  r.state = state;
  return r;
}

inline SwapRecord swap_to(const std::string& to_base, const std::string& from_base,
                          const char* kind = kSwapKindPromote) {
  SwapRecord r;
  r.actor = "admin";
  r.from_base = from_base;
  r.to_base = to_base;
  r.kind = kind;
  return r;
}

inline AdapterRecord adapter(const std::string& name, const std::string& base, int64_t rank = 8) {
  AdapterRecord r;
  r.name = name;
  r.base_model = base;
  r.path = "/adapters/" + name;
  r.rank = rank;
  r.alpha = 2.0 * static_cast<double>(rank);
  r.target_modules = {"q_proj", "v_proj"};
  r.sha256 = sha256_hex(name);
  r.size_bytes = 1000 * rank;
  return r;
}

}  // namespace loragate::testing

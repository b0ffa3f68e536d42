// Asserts two packed matrices hold the same bytes (shape and storage first).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "kernels/cpu/matmul.h"

namespace loragate::testing {

inline void expect_same_packing(const cpu::PackedMatrix& got, const cpu::PackedMatrix& want, const std::string& what) {
  ASSERT_EQ(got.rows(), want.rows()) << what;
  ASSERT_EQ(got.cols(), want.cols()) << what;
  ASSERT_EQ(got.storage(), want.storage()) << what;
  ASSERT_EQ(got.bytes(), want.bytes()) << what;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.bytes()), 0) << what << " packs different bytes";
}

}  // namespace loragate::testing

#include "common/status.h"

#include <gtest/gtest.h>

#include "common/dtype.h"

namespace loragate {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return Status::invalid_argument("value must be positive, got " + std::to_string(v));
  return v;
}

Status twice(int v, int* out) {
  LG_ASSIGN_OR_RETURN(int x, parse_positive(v));
  *out = 2 * x;
  return Status::ok();
}

TEST(StatusTest, PropagatesErrorsAndValues) {
  int out = 0;
  EXPECT_TRUE(twice(4, &out).is_ok());
  EXPECT_EQ(out, 8);
  Status s = twice(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.with_context("flag --n").message(), "flag --n: value must be positive, got -1");
}

TEST(DTypeTest, Bf16RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.5f)), 1.5f);
  // 1 + 2^-8 is halfway between two bf16 values: ties go to even (1.0).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
}

TEST(DTypeTest, F16ConversionsAreExactOnRepresentableValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  }
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);  // overflow -> +inf
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
}

}  // namespace
}  // namespace loragate

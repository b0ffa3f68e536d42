// Private to the CPU matmul: the packed layout, the per-ISA kernels and a way
// for tests to force an ISA. Not for use outside kernels/cpu and its tests.
//
// Packed layout. W [N, K] is cut into panels of kNR = 32 output rows; a panel
// stores, for each k in order, the 32 weights W[n0..n0+31][k] side by side, so
// a kernel walks one contiguous stream per panel. The last panel is padded
// with zero rows. Panel p starts at element p * K * kNR (64-byte aligned).
//  - F32 storage: the 32 weights of one k are plain floats (two zmm).
//  - BF16 storage: the 32 bf16 of one k are one 64-byte line, interleaved so
//    that 32-bit lane j holds panel row (output) j in its low half and row
//    16 + j in its high half. Widening to f32 is then one shift (low halves) and one AND
//    (high halves) per line, instead of two cross-lane extensions.
//  - INT8 storage: the panel starts with its 32 f32 scales (128 bytes), then
//    one 128-byte line per quad of k (k = 4i..4i+3; the last quad is
//    zero-padded): bytes 4j..4j+3 hold rows j's four int8 weights for rows
//    0..15, bytes 64 + 4j.. the same for rows 16 + j. A 32-bit lane thus holds
//    one row's four k (the int8 dot-product layout), and shifting the lane
//    left by 24, 16, 8 or 0 bits and then arithmetically right by 24 widens
//    the k it asks for.
//  - INT4 storage (group G = 32 or 64): one block per group of k: the
//    group's 32 f16 scales (64 bytes), for asymmetric types its 32 f16
//    minimums (64 bytes), then G/4 lines of 64 bytes, one per quad of k
//    (k = 4i..4i+3 of the group): byte 4j + c holds row j's u for k = 4i + c
//    in its low nibble and row 16 + j's in its high nibble (zero past K).
//    Masking either nibble thus gives 16 rows in the int8 dot-product layout
//    (a 32-bit lane = one row's four k), which the W4A8 kernels
//    (int4_matmul_internal.h) feed straight to vpdpbusd / vpmaddubsw.
//    Symmetric types store u = q + 8, so w = fma(u, s, -8 s) for both kinds,
//    with the minimum -8 s.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"

namespace loragate::cpu::detail {

using cpu::Isa;

inline constexpr int64_t kNR = 32;      // output rows per panel
inline constexpr int kMaxMR = 14;       // tallest M tile (2 * 14 accumulators + operands fit 32 zmm)

inline int64_t num_panels(int64_t n) { return (n + kNR - 1) / kNR; }

// Below this many weights a second thread costs more (wake-up, barrier) than
// it saves: every matmul (float and integer) then runs on one thread.
inline constexpr int64_t kMinParallelWeights = 64 * 1024;

// Position of panel row j (0..31) inside a k-slice of BF16 storage (see above).
inline int64_t bf16_slot(int64_t j) { return j < 16 ? 2 * j : 2 * (j - 16) + 1; }

// Bytes of one packed panel of a matrix with `k` columns.
inline int64_t int8_quads(int64_t k) { return (k + 3) / 4; }
inline constexpr int64_t kInt8ScaleBytes = kNR * 4;
inline int64_t int4_block_bytes(WeightType t) {
  return (int4_asymmetric(t) ? 2 : 1) * kNR * 2 + kNR / 2 * int4_group(t);
}
inline int64_t int4_blocks(WeightType t, int64_t k) { return (k + int4_group(t) - 1) / int4_group(t); }
// Byte of a group's lines holding panel row j's u at k = c of the group.
inline int64_t int4_byte(int64_t j, int64_t c) { return (c / 4) * 64 + (j % 16) * 4 + c % 4; }
inline int64_t panel_bytes(WeightType t, int64_t k) {
  switch (t) {
    case WeightType::kF32: return k * kNR * 4;
    case WeightType::kBF16: return k * kNR * 2;
    case WeightType::kInt8:
    case WeightType::kInt8Outlier: return kInt8ScaleBytes + int8_quads(k) * kNR * 4;
    default: return int4_blocks(t, k) * int4_block_bytes(t);
  }
}

// Element (panel row j, column c) of a quantised panel (its first byte),
// dequantised exactly as the kernels do it.
float dequantize(WeightType t, const uint8_t* panel, int j, int64_t c);

// Same contract as cpu::matmul, but on the given ISA (which the CPU must
// support) and with `threads` threads of the compute pool (0 = all of them).
// Every ISA and thread count gives bit-identical results.
void matmul_with(Isa isa, int threads, const float* x, int64_t m, int64_t ldx, const PackedMatrix& w,
                 float* y, int64_t ldy);

// One M tile: `mr` rows of x and y. `xp` holds the rows' activations packed
// k-major (xp[k * mr + r]); for mr == 1 that is just the row of x. `y` is the
// tile's first output row (column 0); rows are ldy apart.
struct Tile {
  const float* xp;
  int mr;
  float* y;
};

// The tallest tile each ISA's kernels handle (registers bound it).
int max_mr(Isa isa);

// Computes every tile over float (f32, bf16) W panels [p_begin, p_end)
// (columns p_begin * kNR up to N). Each kernel chooses how many panels to
// stream together; the result never depends on it: one accumulator per
// output, k in order.
void run_panels_scalar(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                       int64_t p_end);
void run_panels_avx2(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                     int64_t p_end);
void run_panels_avx512(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                       int64_t p_end);

}  // namespace loragate::cpu::detail

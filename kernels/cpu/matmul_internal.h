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
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"

namespace loragate::cpu::detail {

using cpu::Isa;

inline constexpr int64_t kNR = 32;      // output rows per panel
inline constexpr int kMaxMR = 14;       // tallest M tile (2 * 14 accumulators + operands fit 32 zmm)

inline int64_t num_panels(int64_t n) { return (n + kNR - 1) / kNR; }

// Position of panel row j (0..31) inside a k-slice of BF16 storage (see above).
inline int64_t bf16_slot(int64_t j) { return j < 16 ? 2 * j : 2 * (j - 16) + 1; }

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

// Computes every tile over W panels [p_begin, p_end) (columns p_begin * kNR
// up to N). Each kernel chooses how many panels to stream together; the
// result never depends on it: one accumulator per output, k in order.
void run_panels_scalar(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                       int64_t p_end);
void run_panels_avx2(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                     int64_t p_end);
void run_panels_avx512(const Tile* tiles, int ntiles, int64_t ldy, const PackedMatrix& w, int64_t p_begin,
                       int64_t p_end);

}  // namespace loragate::cpu::detail

// Packing W [N, K] into kNR-row panels (layout in matmul_internal.h), with
// the quantisation of weight_type.h, and the slow element accessor used by
// tests and tied-embedding lookups.
#include <cassert>
#include <cstdlib>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/thread_pool.h"

namespace loragate::cpu {

using detail::kNR;

void PackedMatrix::FreeDeleter::operator()(void* p) const { std::free(p); }

namespace {

// 64-byte aligned (one cache line per bf16 k-slice). Large matrices are
// 2 MB aligned and asked to be backed by huge pages: decode streams every
// weight once per token, and with 4 KB pages that costs a TLB miss (a
// nested page walk under a hypervisor) every 4 KB of each stream.
void* allocate_weights(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  void* mem = nullptr;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  if (posix_memalign(&mem, align, bytes) != 0) throw std::bad_alloc();
  if (bytes >= kHuge) madvise(mem, bytes / kHuge * kHuge, MADV_HUGEPAGE);  // a hint; failure is harmless
  return mem;
}

// A row-major matrix already in memory, converted to f32 a row at a time.
class DenseRows final : public PackedMatrix::RowSource {
 public:
  DenseRows(const void* src, DType dtype, int64_t cols)
      : src_(static_cast<const uint8_t*>(src)), dtype_(dtype), cols_(cols),
        row_bytes_(static_cast<size_t>(cols) * dtype_size(dtype)) {}
  void read_row(int64_t row, float* out) const override {
    convert_to_f32(dtype_, src_ + static_cast<size_t>(row) * row_bytes_, out, static_cast<size_t>(cols_));
  }

 private:
  const uint8_t* src_;
  DType dtype_;
  int64_t cols_;
  size_t row_bytes_;
};

// Writes row j (cols f32 values) of a panel in f32 or bf16.
void pack_float_row(bool bf16, const float* row, int64_t cols, int64_t j, uint8_t* panel) {
  if (bf16) {
    auto* d = reinterpret_cast<uint16_t*>(panel) + detail::bf16_slot(j);
    for (int64_t k = 0; k < cols; ++k) d[k * kNR] = f32_to_bf16(row[k]);
  } else {
    auto* d = reinterpret_cast<float*>(panel) + j;
    for (int64_t k = 0; k < cols; ++k) d[k * kNR] = row[k];
  }
}

// Writes the quantised row j into its panel: int8 scale then levels in
// quads of k; int4 per group of k, the scale (and minimum) then the levels
// in quads of k, rows 16.. in the high nibbles.
void place_quantized_row(WeightType t, const QuantizedRow& q, int64_t cols, int64_t j, uint8_t* panel) {
  if (is_int8(t)) {
    reinterpret_cast<float*>(panel)[j] = q.scale;
    uint8_t* lines = panel + detail::kInt8ScaleBytes + (j / 16) * 64 + (j % 16) * 4;
    for (int64_t k = 0; k < cols; ++k) lines[(k / 4) * kNR * 4 + k % 4] = q.levels[static_cast<size_t>(k)];
    return;
  }
  const int64_t group = int4_group(t), block = detail::int4_block_bytes(t);
  const bool asym = int4_asymmetric(t);
  for (int64_t g0 = 0, g = 0; g0 < cols; g0 += group, ++g) {
    uint8_t* b = panel + g * block;
    reinterpret_cast<uint16_t*>(b)[j] = q.group_scales[static_cast<size_t>(g)];
    if (asym) reinterpret_cast<uint16_t*>(b + kNR * 2)[j] = q.group_mins[static_cast<size_t>(g)];
    uint8_t* lines = b + (asym ? 2 : 1) * kNR * 2;
    for (int64_t k = g0; k < std::min(cols, g0 + group); ++k) {
      const auto u = static_cast<unsigned>(q.levels[static_cast<size_t>(k)]);
      lines[detail::int4_byte(j, k - g0)] |= static_cast<uint8_t>(u << (j < 16 ? 0 : 4));
    }
  }
}

}  // namespace

namespace detail {

float dequantize(WeightType t, const uint8_t* panel, int j, int64_t c) {
  if (is_int8(t)) {
    const float scale = reinterpret_cast<const float*>(panel)[j];
    const uint8_t* lines = panel + kInt8ScaleBytes + (j / 16) * 64 + (j % 16) * 4;
    return static_cast<float>(static_cast<int8_t>(lines[(c / 4) * kNR * 4 + c % 4])) * scale;
  }
  const int64_t group = int4_group(t);
  const bool asym = int4_asymmetric(t);
  const uint8_t* b = panel + (c / group) * int4_block_bytes(t);
  const float scale = f16_to_f32(reinterpret_cast<const uint16_t*>(b)[j]);
  const float minimum = asym ? f16_to_f32(reinterpret_cast<const uint16_t*>(b + kNR * 2)[j]) : -8.0f * scale;
  const uint8_t byte = b[(asym ? 2 : 1) * kNR * 2 + int4_byte(j, c % group)];
  const unsigned u = j < 16 ? byte & 15u : byte >> 4;
  return std::fma(static_cast<float>(u), scale, minimum);
}

}  // namespace detail

PackedMatrix PackedMatrix::pack(const void* src, DType src_dtype, int64_t rows, int64_t cols, WeightType storage) {
  return pack_rows(DenseRows(src, src_dtype, cols), rows, cols, storage);
}

template <typename FillPanel>
PackedMatrix PackedMatrix::build(int64_t rows, int64_t cols, WeightType storage, const FillPanel& fill) {
  assert(rows >= 0 && cols >= 0);
  PackedMatrix out;
  if (rows <= 0) return out;
  out.rows_ = rows;
  out.cols_ = cols;
  out.storage_ = storage;

  const int64_t panels = detail::num_panels(rows);
  const size_t panel_bytes = static_cast<size_t>(detail::panel_bytes(storage, cols));  // a multiple of 64
  out.bytes_ = bytes_for(rows, cols, storage);
  const size_t alloc = out.bytes_ == 0 ? 64 : (out.bytes_ + 63) / 64 * 64;
  void* mem = allocate_weights(alloc);
  out.data_.reset(mem);
  std::memset(mem, 0, alloc);  // zero padding rows of the last panel (and k past K)

  auto* base = static_cast<uint8_t*>(mem);
  // Panels are independent; packing a large matrix (an lm_head) is worth two threads.
  compute_pool().run(rows * cols >= (int64_t{1} << 20) ? 0 : 1, [&](int thread, int nt) {
    for (int64_t p = panels * thread / nt; p < panels * (thread + 1) / nt; ++p) {
      const int64_t first = p * kNR;
      fill(first, std::min<int64_t>(kNR, rows - first), base + static_cast<size_t>(p) * panel_bytes);
    }
  });
  return out;
}

PackedMatrix PackedMatrix::pack_rows(const RowSource& source, int64_t rows, int64_t cols, WeightType storage) {
  return build(rows, cols, storage, [&](int64_t first, int64_t nrow, uint8_t* panel) {
    std::vector<float> row(static_cast<size_t>(cols));
    QuantizedRow q;
    for (int64_t j = 0; cols > 0 && j < nrow; ++j) {
      source.read_row(first + j, row.data());
      if (is_quantized(storage)) {
        quantize_row(storage, row.data(), cols, q);
        place_quantized_row(storage, q, cols, j, panel);
      } else {
        pack_float_row(storage == WeightType::kBF16, row.data(), cols, j, panel);
      }
    }
    source.rows_packed(first, first + nrow);
  });
}

PackedMatrix PackedMatrix::pack_quantized(const QuantizedRowSource& source, int64_t rows, int64_t cols,
                                          WeightType storage) {
  assert(is_quantized(storage));
  return build(rows, cols, storage, [&](int64_t first, int64_t nrow, uint8_t* panel) {
    QuantizedRow q;
    for (int64_t j = 0; j < nrow; ++j) {
      source.read_row(first + j, q);
      place_quantized_row(storage, q, cols, j, panel);
    }
    source.rows_packed(first, first + nrow);
  });
}

size_t PackedMatrix::bytes_for(int64_t rows, int64_t cols, WeightType storage) {
  if (rows <= 0) return 0;
  return static_cast<size_t>(detail::num_panels(rows)) * static_cast<size_t>(detail::panel_bytes(storage, cols));
}

float PackedMatrix::at(int64_t r, int64_t c) const {
  assert(r >= 0 && r < rows_ && c >= 0 && c < cols_);
  const int64_t p = r / kNR, j = r % kNR;
  if (is_quantized(storage_)) {
    const auto* panel = static_cast<const uint8_t*>(data_.get()) + p * detail::panel_bytes(storage_, cols_);
    return detail::dequantize(storage_, panel, static_cast<int>(j), c);
  }
  const int64_t line = (p * cols_ + c) * kNR;  // first element of panel p's k-slice c
  if (storage_ == WeightType::kBF16)
    return bf16_to_f32(static_cast<const uint16_t*>(data_.get())[line + detail::bf16_slot(j)]);
  return static_cast<const float*>(data_.get())[line + j];
}

}  // namespace loragate::cpu

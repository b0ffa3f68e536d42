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

constexpr float kF16Max = 65504.0f;

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

// int8: symmetric per row, q = round(w / s) with s = max |w| / 127.
void pack_int8_row(const float* row, int64_t cols, int64_t j, uint8_t* panel) {
  float amax = 0;
  for (int64_t k = 0; k < cols; ++k) amax = std::max(amax, std::fabs(row[k]));
  const float scale = amax / 127.0f;
  reinterpret_cast<float*>(panel)[j] = scale;
  uint8_t* lines = panel + detail::kInt8ScaleBytes + (j / 16) * 64 + (j % 16) * 4;
  for (int64_t k = 0; k < cols; ++k) {
    const float q = scale > 0 ? std::clamp(std::nearbyint(row[k] / scale), -127.0f, 127.0f) : 0.0f;
    lines[(k / 4) * kNR * 4 + k % 4] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
}

// int4: per group of k, the f16 scale (and minimum) first, then u = round((w - min) / s)
// computed with the stored, f16-rounded values, so that dequantising gives the nearest level.
void pack_int4_row(WeightType t, const float* row, int64_t cols, int64_t j, uint8_t* panel) {
  const int64_t group = int4_group(t), block = detail::int4_block_bytes(t);
  const bool asym = int4_asymmetric(t);
  for (int64_t g0 = 0; g0 < cols; g0 += group) {
    const int64_t g1 = std::min(cols, g0 + group);
    uint8_t* b = panel + (g0 / group) * block;
    float scale, minimum;
    if (asym) {
      float lo = row[g0], hi = row[g0];
      for (int64_t k = g0; k < g1; ++k) lo = std::min(lo, row[k]), hi = std::max(hi, row[k]);
      const uint16_t s16 = f32_to_f16(std::min((hi - lo) / 15.0f, kF16Max));
      const uint16_t m16 = f32_to_f16(std::clamp(lo, -kF16Max, kF16Max));
      reinterpret_cast<uint16_t*>(b)[j] = s16;
      reinterpret_cast<uint16_t*>(b + kNR * 2)[j] = m16;
      scale = f16_to_f32(s16);
      minimum = f16_to_f32(m16);
    } else {
      float amax = 0;
      for (int64_t k = g0; k < g1; ++k) amax = std::max(amax, std::fabs(row[k]));
      const uint16_t s16 = f32_to_f16(std::min(amax / 7.0f, kF16Max));
      reinterpret_cast<uint16_t*>(b)[j] = s16;
      scale = f16_to_f32(s16);
      minimum = -8.0f * scale;
    }
    uint8_t* lines = b + (asym ? 2 : 1) * kNR * 2;
    for (int64_t k = g0; k < g1; ++k) {
      const float u = scale > 0 ? std::clamp(std::nearbyint((row[k] - minimum) / scale), 0.0f, 15.0f)
                                : (asym ? 0.0f : 8.0f);
      const int64_t pair = (k - g0) / 2;
      lines[pair * kNR + j] |= static_cast<uint8_t>(static_cast<unsigned>(u) << (((k - g0) % 2) * 4));
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
  const uint8_t byte = b[(asym ? 2 : 1) * kNR * 2 + ((c % group) / 2) * kNR + j];
  const unsigned u = (c % 2 == 0) ? byte & 15u : byte >> 4;
  return std::fma(static_cast<float>(u), scale, minimum);
}

}  // namespace detail

PackedMatrix PackedMatrix::pack(const void* src, DType src_dtype, int64_t rows, int64_t cols, WeightType storage) {
  return pack_rows(DenseRows(src, src_dtype, cols), rows, cols, storage);
}

PackedMatrix PackedMatrix::pack_rows(const RowSource& source, int64_t rows, int64_t cols, WeightType storage) {
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
  if (cols == 0) {
    source.rows_packed(0, rows);
    return out;
  }

  auto* base = static_cast<uint8_t*>(mem);
  // Panels are independent; packing a large matrix (an lm_head) is worth two threads.
  compute_pool().run(rows * cols >= (int64_t{1} << 20) ? 0 : 1, [&](int thread, int nt) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t p = panels * thread / nt; p < panels * (thread + 1) / nt; ++p) {
      uint8_t* panel = base + static_cast<size_t>(p) * panel_bytes;
      const int64_t first = p * kNR;
      const int64_t nrow = std::min<int64_t>(kNR, rows - first);
      for (int64_t j = 0; j < nrow; ++j) {
        source.read_row(first + j, row.data());
        switch (storage) {
          case WeightType::kF32: pack_float_row(false, row.data(), cols, j, panel); break;
          case WeightType::kBF16: pack_float_row(true, row.data(), cols, j, panel); break;
          case WeightType::kInt8:
          case WeightType::kInt8Outlier: pack_int8_row(row.data(), cols, j, panel); break;
          default: pack_int4_row(storage, row.data(), cols, j, panel); break;
        }
      }
      source.rows_packed(first, first + nrow);
    }
  });
  return out;
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

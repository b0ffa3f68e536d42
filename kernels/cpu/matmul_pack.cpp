// Packing W [N, K] into kNR-row panels (layout in matmul_internal.h), and the
// slow element accessor used by tests and tied-embedding lookups.
#include <cassert>
#include <cstdlib>
#include <sys/mman.h>

#include <algorithm>
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

}  // namespace

PackedMatrix PackedMatrix::pack(const void* src, DType src_dtype, int64_t rows, int64_t cols, DType storage) {
  return pack_rows(DenseRows(src, src_dtype, cols), rows, cols, storage);
}

PackedMatrix PackedMatrix::pack_rows(const RowSource& source, int64_t rows, int64_t cols, DType storage) {
  assert(rows >= 0 && cols >= 0);
  assert(storage == DType::kF32 || storage == DType::kBF16);
  PackedMatrix out;
  if (rows <= 0) return out;
  const bool bf16 = storage == DType::kBF16;
  out.rows_ = rows;
  out.cols_ = cols;
  out.storage_ = bf16 ? DType::kBF16 : DType::kF32;

  const int64_t panels = detail::num_panels(rows);
  const size_t elem = bf16 ? 2 : 4;
  const size_t panel_bytes = static_cast<size_t>(cols) * kNR * elem;  // a multiple of 64
  out.bytes_ = static_cast<size_t>(panels) * panel_bytes;
  const size_t alloc = out.bytes_ == 0 ? 64 : (out.bytes_ + 63) / 64 * 64;
  void* mem = allocate_weights(alloc);
  out.data_.reset(mem);
  std::memset(mem, 0, alloc);  // zero padding rows of the last panel
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
        if (bf16) {
          auto* d = reinterpret_cast<uint16_t*>(panel) + detail::bf16_slot(j);
          for (int64_t k = 0; k < cols; ++k) d[k * kNR] = f32_to_bf16(row[static_cast<size_t>(k)]);
        } else {
          auto* d = reinterpret_cast<float*>(panel) + j;
          for (int64_t k = 0; k < cols; ++k) d[k * kNR] = row[static_cast<size_t>(k)];
        }
      }
      source.rows_packed(first, first + nrow);
    }
  });
  return out;
}

float PackedMatrix::at(int64_t r, int64_t c) const {
  assert(r >= 0 && r < rows_ && c >= 0 && c < cols_);
  const int64_t p = r / kNR, j = r % kNR;
  const int64_t line = (p * cols_ + c) * kNR;  // first element of panel p's k-slice c
  if (storage_ == DType::kBF16)
    return bf16_to_f32(static_cast<const uint16_t*>(data_.get())[line + detail::bf16_slot(j)]);
  return static_cast<const float*>(data_.get())[line + j];
}

}  // namespace loragate::cpu

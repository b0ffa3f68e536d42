// Dense matrix multiply for linear layers: y[m, :] = W · x[m, :] for a
// weight W stored [out, in] (Hugging Face order), i.e. Y = X · Wᵀ.
//
// Weights are packed once at load time into a layout the kernels stream
// through: f32, bf16, or quantised to int8 / int4 (common/weight_type.h).
//  - f32, bf16: f32 arithmetic with FMA.
//  - int8 (and int8-outlier through this entry): W8A8. Each row of x is
//    quantised to int8 with one scale (vLLM's per-token dynamic scheme) and
//    dotted with the int8 weights in exact int32 arithmetic: the int8-outlier
//    product (int8_matmul.h) with no outliers but inf and NaN.
//  - int4: W4A8. Each row of x is quantised to int8 per block of 32 and
//    dotted with the int4 levels in exact int32 arithmetic, one scale
//    epilogue per block (llama.cpp's Q4 x Q8 scheme; int4_matmul_internal.h).
// Integer sums are exact and every float step has one fixed order, so all
// ISAs give bit-identical results. PackedMatrix::at() gives the dequantised
// weights; the product differs from the f32 product over them by the
// activation rounding (at most half a step of each x).
//
// Batch invariance (a contract the engine relies on): every output element
// y[m][n] is computed with the same sequence of floating-point operations
// whatever M is and wherever row m sits in the batch, so a sequence's result
// never depends on what else is batched with it.
//
// Threading: matmul() parallelises internally (compute_pool(),
// kernels/cpu/thread_pool.h) and may be called from several threads; a PackedMatrix is
// immutable after packing and may be shared by threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/dtype.h"
#include "common/weight_type.h"
#include "kernels/cpu/quantize.h"

namespace loragate::cpu {

class PackedMatrix {
 public:
  // The rows of a matrix to pack, produced one at a time, so that a matrix
  // stacked from several tensors (or with a LoRA merged in) never exists
  // whole in f32. pack_rows() asks for each row once, from several threads
  // at once (for different rows), and after each panel says that its rows
  // are packed, so a source read from a mapped file can release them.
  class RowSource {
   public:
    virtual ~RowSource() = default;
    // Writes row `row` (cols values) as f32 into `out`.
    virtual void read_row(int64_t row, float* out) const = 0;
    // Rows [begin, end) are packed and will not be read again.
    virtual void rows_packed(int64_t /*begin*/, int64_t /*end*/) const {}
  };

  // The rows of a matrix already quantised (a `loragate quantize` file):
  // the same contract as RowSource, each row's levels and scales as
  // kernels/cpu/quantize.h describes them.
  class QuantizedRowSource {
   public:
    virtual ~QuantizedRowSource() = default;
    virtual void read_row(int64_t row, QuantizedRow& out) const = 0;
    virtual void rows_packed(int64_t /*begin*/, int64_t /*end*/) const {}
  };

  PackedMatrix() = default;
  // Packs a row-major [rows, cols] matrix of `src_dtype` (F32, F16 or BF16)
  // into `storage` (bf16 rounds to nearest even; quantised types compute
  // their scales from each row as weight_type.h describes).
  static PackedMatrix pack(const void* src, DType src_dtype, int64_t rows, int64_t cols, WeightType storage);
  // Packs the [rows, cols] matrix `source` gives, row by row, into `storage`;
  // the same layout and values as pack() of those rows in f32.
  static PackedMatrix pack_rows(const RowSource& source, int64_t rows, int64_t cols, WeightType storage);
  // Packs rows quantised already into quantised `storage`: the same bytes as
  // pack_rows() of the values they were quantised from.
  static PackedMatrix pack_quantized(const QuantizedRowSource& source, int64_t rows, int64_t cols,
                                     WeightType storage);

  int64_t rows() const { return rows_; }  // out features (N)
  int64_t cols() const { return cols_; }  // in features (K)
  WeightType storage() const { return storage_; }
  size_t bytes() const { return bytes_; }   // memory held by the packed data
  // bytes() of a [rows, cols] matrix packed in `storage`, without packing one.
  static size_t bytes_for(int64_t rows, int64_t cols, WeightType storage);
  const void* data() const { return data_.get(); }
  bool empty() const { return rows_ == 0; }

  // Unpacks element (r, c) as f32, dequantised (slow; for tests and tied-embedding lookups).
  float at(int64_t r, int64_t c) const;

 private:
  // Allocates a zeroed [rows, cols] `storage` matrix and calls
  // fill(first_row, rows_in_panel, panel) for each panel, from compute_pool() threads.
  template <typename FillPanel>
  static PackedMatrix build(int64_t rows, int64_t cols, WeightType storage, const FillPanel& fill);

  struct FreeDeleter { void operator()(void* p) const; };
  int64_t rows_ = 0, cols_ = 0;
  WeightType storage_ = WeightType::kF32;
  size_t bytes_ = 0;
  std::unique_ptr<void, FreeDeleter> data_;  // 64-byte aligned
};

// y[m * ldy + n] = sum_k x[m * ldx + k] * W[n][k] for m < M, n < W.rows().
// Overwrites y. x and y must not alias.
void matmul(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy);

}  // namespace loragate::cpu

// Dense projections on the GPU through cuBLASLt: y[M, N] = x[M, K] · W[N, K]ᵀ
// with bf16 x and W (raw uint16_t bits, row-major), f32 accumulation and an
// f32 y, the layout of the base model's weights (one row per output).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "kernels/cuda/cuda_device.h"

namespace loragate::cuda {

// A cuBLASLt handle and the device workspace its kernels may use. Calls on
// one handle must not run concurrently on different streams (they share the
// workspace). Moves, does not copy.
class CublasLt {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;
  static Result<CublasLt> create(size_t workspace_bytes = kDefaultWorkspaceBytes);
  CublasLt() = default;
  CublasLt(CublasLt&& other) noexcept;
  CublasLt& operator=(CublasLt&& other) noexcept;
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;
  ~CublasLt();

  // y = x · Wᵀ, or y += x · Wᵀ when `accumulate`. All pointers are device
  // memory; launches on `stream` (a cudaStream_t) and returns at once.
  Status gemm_bf16(const uint16_t* x, const uint16_t* w, float* y, int64_t m, int64_t n, int64_t k, bool accumulate,
                   void* stream) const;

 private:
  void* handle_ = nullptr;  // a cublasLtHandle_t
  DeviceBuffer workspace_;
};

}  // namespace loragate::cuda

// Host code only (cuBLASLt picks and launches the kernels), so g++ compiles
// it, under the project's warnings, and it costs nvcc nothing.
#include "kernels/cuda/gemm_cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace loragate::cuda {
namespace {

Status lt_status(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return Status::internal(std::string(what) + ": " + cublasLtGetStatusString(st));
}

cublasLtHandle_t as_handle(void* h) { return static_cast<cublasLtHandle_t>(h); }

template <class T, cublasStatus_t (*Destroy)(T)>
struct LtDeleter {
  void operator()(T p) const { Destroy(p); }
};
using MatmulDesc = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>,
                                   LtDeleter<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>>;
using Layout = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>,
                               LtDeleter<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>>;
using Preference = std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                                   LtDeleter<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>>;

Result<Layout> make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t raw = nullptr;
  LG_RETURN_IF_ERROR(lt_status(
      cublasLtMatrixLayoutCreate(&raw, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
      "cublasLtMatrixLayoutCreate"));
  return Layout(raw);
}

// The largest power of two (at most 256) dividing `p`. cuBLASLt assumes
// 256-byte alignment unless told otherwise, and views into larger buffers
// may be less aligned than that.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

}  // namespace

Result<CublasLt> CublasLt::create(size_t workspace_bytes) {
  CublasLt lt;
  cublasLtHandle_t raw = nullptr;
  LG_RETURN_IF_ERROR(lt_status(cublasLtCreate(&raw), "cublasLtCreate"));
  lt.handle_ = raw;
  if (workspace_bytes > 0) {
    LG_ASSIGN_OR_RETURN(lt.workspace_, DeviceBuffer::allocate(workspace_bytes));
  }
  return Result<CublasLt>(std::move(lt));
}

CublasLt::CublasLt(CublasLt&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), workspace_(std::move(other.workspace_)) {}

CublasLt& CublasLt::operator=(CublasLt&& other) noexcept {
  if (this != &other) {
    if (handle_) cublasLtDestroy(as_handle(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
    workspace_ = std::move(other.workspace_);
  }
  return *this;
}

CublasLt::~CublasLt() {
  if (handle_) cublasLtDestroy(as_handle(handle_));
}

Status CublasLt::gemm_bf16(const uint16_t* x, const uint16_t* w, float* y, int64_t m, int64_t n, int64_t k,
                           bool accumulate, void* stream) const {
  if (m < 0 || n <= 0 || k <= 0) {
    return Status::invalid_argument("gemm_bf16: m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " +
                                    std::to_string(k));
  }
  if (m == 0) return Status::ok();
  if (!x || !w || !y) return Status::invalid_argument("gemm_bf16: null x, w or y");
  if (!handle_) return Status::failed_precondition("gemm_bf16 on an empty CublasLt handle");

  // cuBLASLt is column-major: row-major y[M, N] is column-major yᵀ[N, M], so
  // compute yᵀ = W · xᵀ, with row-major W[N, K] read as column-major Wᵀ
  // (transposed back by TRANSA) and row-major x[M, K] as column-major xᵀ.
  cublasLtMatmulDesc_t raw_desc = nullptr;
  LG_RETURN_IF_ERROR(lt_status(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                               "cublasLtMatmulDescCreate"));
  const MatmulDesc desc(raw_desc);
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  LG_RETURN_IF_ERROR(lt_status(
      cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a),
      "cublasLtMatmulDescSetAttribute(TRANSA)"));
  LG_RETURN_IF_ERROR(lt_status(
      cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b),
      "cublasLtMatmulDescSetAttribute(TRANSB)"));
  LG_ASSIGN_OR_RETURN(const Layout a_layout, make_layout(CUDA_R_16BF, k, n, k));
  LG_ASSIGN_OR_RETURN(const Layout b_layout, make_layout(CUDA_R_16BF, k, m, k));
  LG_ASSIGN_OR_RETURN(const Layout c_layout, make_layout(CUDA_R_32F, n, m, n));

  cublasLtMatmulPreference_t raw_pref = nullptr;
  LG_RETURN_IF_ERROR(lt_status(cublasLtMatmulPreferenceCreate(&raw_pref), "cublasLtMatmulPreferenceCreate"));
  const Preference pref(raw_pref);
  const uint64_t workspace_bytes = workspace_.bytes();
  LG_RETURN_IF_ERROR(lt_status(cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                    &workspace_bytes, sizeof workspace_bytes),
                               "cublasLtMatmulPreferenceSetAttribute"));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, w},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, x},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, y},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, y}};
  for (const auto& [attribute, pointer] : alignments) {
    const uint32_t align = alignment_of(pointer);
    LG_RETURN_IF_ERROR(lt_status(cublasLtMatmulPreferenceSetAttribute(pref.get(), attribute, &align, sizeof align),
                                 "cublasLtMatmulPreferenceSetAttribute(alignment)"));
  }
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  LG_RETURN_IF_ERROR(lt_status(cublasLtMatmulAlgoGetHeuristic(as_handle(handle_), desc.get(), a_layout.get(),
                                                              b_layout.get(), c_layout.get(), c_layout.get(),
                                                              pref.get(), 1, &heuristic, &found),
                               "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) {
    return Status::unsupported("gemm_bf16: cuBLASLt has no algorithm for m " + std::to_string(m) + ", n " +
                               std::to_string(n) + ", k " + std::to_string(k));
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return lt_status(cublasLtMatmul(as_handle(handle_), desc.get(), &alpha, w, a_layout.get(), x, b_layout.get(), &beta,
                                  y, c_layout.get(), y, c_layout.get(), &heuristic.algo, workspace_.get(),
                                  workspace_.bytes(), static_cast<cudaStream_t>(stream)),
                   "cublasLtMatmul");
}

}  // namespace loragate::cuda

// Shared by the .cu files only (it names CUDA types, so no public header
// includes it): turning CUDA errors into loragate Status values.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/status.h"

namespace loragate::cuda::detail {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return Status::internal(std::string(what) + ": " + cudaGetErrorString(err));
}

// After a <<<>>> launch: a bad configuration shows up here, not at the launch.
inline Status launch_status(const char* op) { return cuda_status(cudaGetLastError(), op); }

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace loragate::cuda::detail

#include "kernels/cuda/device_select.h"

#include <string>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {

Status set_device(int index) {
  return detail::cuda_status(cudaSetDevice(index), ("cudaSetDevice(" + std::to_string(index) + ")").c_str());
}

}  // namespace loragate::cuda

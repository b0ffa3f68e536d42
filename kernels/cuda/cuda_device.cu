#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <utility>

namespace loragate::cuda {

namespace {
Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return Status::internal(std::string(what) + ": " + cudaGetErrorString(err));
}
}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  Status s = cuda_status(cudaMalloc(&b.ptr_, bytes), "cudaMalloc");
  if (!s.is_ok()) return s;
  b.bytes_ = bytes;
  return Result<DeviceBuffer>(std::move(b));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

Status DeviceBuffer::copy_from_host(const void* src, size_t bytes) {
  if (bytes > bytes_) return Status::invalid_argument("copy of " + std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_));
  return cuda_status(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

Status DeviceBuffer::copy_to_host(void* dst, size_t bytes) const {
  if (bytes > bytes_) return Status::invalid_argument("copy of " + std::to_string(bytes) + " bytes from a buffer of " + std::to_string(bytes_));
  return cuda_status(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}

}  // namespace loragate::cuda

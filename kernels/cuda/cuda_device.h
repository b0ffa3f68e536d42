// Small RAII and query helpers for the CUDA backend. Compiled only when nvcc
// is found; callers check cuda_device_count() and skip cleanly when it is 0.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace loragate::cuda {

// Number of usable CUDA devices (0 when there is no driver or no device).
int cuda_device_count();

// A device buffer of `bytes`, freed on destruction. Copying is deleted.
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> allocate(size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Status copy_from_host(const void* src, size_t bytes);
  Status copy_to_host(void* dst, size_t bytes) const;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace loragate::cuda

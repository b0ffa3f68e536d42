// Moving test data to and from the device; failures are reported to gtest
// (the caller checks HasFailure()) so helpers can return values.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_device.h"

namespace loragate::cuda_test {

inline bool have_device() { return cuda::cuda_device_count() > 0; }

template <class T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) {
  auto b = cuda::DeviceBuffer::allocate(std::max<size_t>(v.size() * sizeof(T), 1));
  if (!b.is_ok()) {
    ADD_FAILURE() << b.status().to_string();
    return {};
  }
  const Status s = b->copy_from_host(v.data(), v.size() * sizeof(T));
  if (!s.is_ok()) ADD_FAILURE() << s.to_string();
  return std::move(b).value();
}

template <class T>
std::vector<T> to_host(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  const Status s = b.copy_to_host(v.data(), n * sizeof(T));
  if (!s.is_ok()) ADD_FAILURE() << s.to_string();
  return v;
}

template <class T>
T* ptr(const cuda::DeviceBuffer& b) {
  return static_cast<T*>(b.get());
}

}  // namespace loragate::cuda_test

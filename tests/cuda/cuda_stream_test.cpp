// Streams, events and pinned buffers: an async round trip on a device, and
// the empty-object and argument checks everywhere.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cuda/cuda_stream.h"
#include "tests/cuda/cuda_test_util.h"

namespace loragate {
namespace {

TEST(CudaStreamTest, AsyncRoundTripThroughPinnedMemory) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device on this machine";
  constexpr size_t kBytes = 1 << 20;
  auto stream = cuda::Stream::create();
  auto done = cuda::Event::create();
  auto start = cuda::Event::create(/*timing=*/true), stop = cuda::Event::create(/*timing=*/true);
  auto src = cuda::HostPinnedBuffer::allocate(kBytes), dst = cuda::HostPinnedBuffer::allocate(kBytes);
  auto dev = cuda::DeviceBuffer::allocate(kBytes);
  ASSERT_TRUE(stream.is_ok() && done.is_ok() && start.is_ok() && stop.is_ok()) << stream.status().to_string();
  ASSERT_TRUE(src.is_ok() && dst.is_ok() && dev.is_ok()) << src.status().to_string();
  ASSERT_NE(stream->get(), nullptr);
  auto* in = static_cast<unsigned char*>(src->get());
  for (size_t i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 3);
  std::memset(dst->get(), 0, kBytes);

  ASSERT_TRUE(start->record(stream->get()).is_ok());
  ASSERT_TRUE(cuda::copy_to_device_async(dev->get(), src->get(), kBytes, stream->get()).is_ok());
  ASSERT_TRUE(cuda::copy_to_host_async(dst->get(), dev->get(), kBytes, stream->get()).is_ok());
  ASSERT_TRUE(stop->record(stream->get()).is_ok());
  ASSERT_TRUE(done->record(stream->get()).is_ok());
  ASSERT_TRUE(done->wait_on(nullptr).is_ok());  // the default stream waits for the copies
  ASSERT_TRUE(done->synchronize().is_ok());
  auto finished = done->done();
  ASSERT_TRUE(finished.is_ok() && *finished);
  auto ms = stop->elapsed_ms_since(*start);
  ASSERT_TRUE(ms.is_ok()) << ms.status().to_string();
  EXPECT_GE(*ms, 0.0f);
  EXPECT_EQ(std::memcmp(src->get(), dst->get(), kBytes), 0);
  ASSERT_TRUE(stream->synchronize().is_ok());
}

TEST(CudaStreamTest, MovesTransferOwnership) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device on this machine";
  auto s = cuda::Stream::create();
  auto e = cuda::Event::create();
  auto p = cuda::HostPinnedBuffer::allocate(64);
  ASSERT_TRUE(s.is_ok() && e.is_ok() && p.is_ok());
  void* raw_stream = s->get();
  cuda::Stream s2 = std::move(*s);
  EXPECT_EQ(s->get(), nullptr);
  EXPECT_EQ(s2.get(), raw_stream);
  cuda::Event e2;
  e2 = std::move(*e);
  EXPECT_EQ(e->get(), nullptr);
  EXPECT_NE(e2.get(), nullptr);
  cuda::HostPinnedBuffer p2(std::move(*p));
  EXPECT_EQ(p->get(), nullptr);
  EXPECT_EQ(p->bytes(), 0u);
  EXPECT_EQ(p2.bytes(), 64u);
  EXPECT_TRUE(s2.synchronize().is_ok());
}

TEST(CudaStreamTest, EmptyObjectsAndBadArgumentsAreRefused) {
  // None of these reach the CUDA runtime, so they hold with or without a device.
  cuda::Stream s;
  EXPECT_EQ(s.synchronize().code(), StatusCode::kFailedPrecondition);
  cuda::Event e;
  EXPECT_EQ(e.record(nullptr).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(e.wait_on(nullptr).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(e.synchronize().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(e.done().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(e.elapsed_ms_since(e).status().code(), StatusCode::kFailedPrecondition);
  auto empty = cuda::HostPinnedBuffer::allocate(0);
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->get(), nullptr);
  int host = 0;
  EXPECT_EQ(cuda::copy_to_device_async(nullptr, &host, 4, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda::copy_to_host_async(&host, nullptr, 4, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(cuda::copy_to_device_async(nullptr, nullptr, 0, nullptr).is_ok());
}

}  // namespace
}  // namespace loragate

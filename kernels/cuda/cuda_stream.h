// RAII owners for CUDA streams, events and pinned host memory, for the async
// host-to-device copies of adapter weights. Handles are `void*` so callers
// need no CUDA headers; every class moves and none copies.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace loragate::cuda {

// A non-blocking stream: it does not synchronise with the legacy default
// stream, so adapter uploads overlap the compute running there.
class Stream {
 public:
  static Result<Stream> create();
  Stream() = default;
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  void* get() const { return stream_; }  // a cudaStream_t
  Status synchronize() const;

 private:
  void* stream_ = nullptr;
};

class Event {
 public:
  // Timing events cost more to record; leave `timing` off for plain ordering.
  static Result<Event> create(bool timing = false);
  Event() = default;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  void* get() const { return event_; }  // a cudaEvent_t
  Status record(void* stream) const;
  // Makes `stream` wait for this event's last record, without blocking the host.
  Status wait_on(void* stream) const;
  Status synchronize() const;
  // True once the work before the last record has finished.
  Result<bool> done() const;
  // Milliseconds from `start` to this event; both must be timing events.
  Result<float> elapsed_ms_since(const Event& start) const;

 private:
  void* event_ = nullptr;
};

// Page-locked host memory: only copies from it are truly asynchronous.
class HostPinnedBuffer {
 public:
  static Result<HostPinnedBuffer> allocate(size_t bytes);
  HostPinnedBuffer() = default;
  HostPinnedBuffer(HostPinnedBuffer&& other) noexcept;
  HostPinnedBuffer& operator=(HostPinnedBuffer&& other) noexcept;
  HostPinnedBuffer(const HostPinnedBuffer&) = delete;
  HostPinnedBuffer& operator=(const HostPinnedBuffer&) = delete;
  ~HostPinnedBuffer();

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Queues a host-to-device copy of `bytes` on `stream` and returns at once.
// `src` must stay alive and unchanged until the stream passes the copy.
Status copy_to_device_async(void* dst, const void* src, size_t bytes, void* stream);
// Queues a device-to-host copy of `bytes` on `stream`.
Status copy_to_host_async(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace loragate::cuda

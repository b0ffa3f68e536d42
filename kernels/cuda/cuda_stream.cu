#include "kernels/cuda/cuda_stream.h"

#include <utility>

#include "kernels/cuda/check.cuh"

namespace loragate::cuda {

using detail::as_stream;
using detail::cuda_status;

namespace {
cudaEvent_t as_event(void* event) { return static_cast<cudaEvent_t>(event); }
}  // namespace

Result<Stream> Stream::create() {
  cudaStream_t s = nullptr;
  LG_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  Stream out;
  out.stream_ = s;
  return Result<Stream>(std::move(out));
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_) cudaStreamDestroy(as_stream(stream_));
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(as_stream(stream_));
}

Status Stream::synchronize() const {
  if (!stream_) return Status::failed_precondition("Stream::synchronize on an empty stream");
  return cuda_status(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize");
}

Result<Event> Event::create(bool timing) {
  cudaEvent_t e = nullptr;
  const unsigned flags = timing ? cudaEventDefault : cudaEventDisableTiming;
  LG_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&e, flags), "cudaEventCreateWithFlags"));
  Event out;
  out.event_ = e;
  return Result<Event>(std::move(out));
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) cudaEventDestroy(as_event(event_));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (event_) cudaEventDestroy(as_event(event_));
}

Status Event::record(void* stream) const {
  if (!event_) return Status::failed_precondition("Event::record on an empty event");
  return cuda_status(cudaEventRecord(as_event(event_), as_stream(stream)), "cudaEventRecord");
}

Status Event::wait_on(void* stream) const {
  if (!event_) return Status::failed_precondition("Event::wait_on on an empty event");
  return cuda_status(cudaStreamWaitEvent(as_stream(stream), as_event(event_), 0), "cudaStreamWaitEvent");
}

Status Event::synchronize() const {
  if (!event_) return Status::failed_precondition("Event::synchronize on an empty event");
  return cuda_status(cudaEventSynchronize(as_event(event_)), "cudaEventSynchronize");
}

Result<bool> Event::done() const {
  if (!event_) return Status::failed_precondition("Event::done on an empty event");
  const cudaError_t err = cudaEventQuery(as_event(event_));
  if (err == cudaErrorNotReady) {
    cudaGetLastError();  // not-ready is an answer, not an error to leave pending
    return false;
  }
  LG_RETURN_IF_ERROR(cuda_status(err, "cudaEventQuery"));
  return true;
}

Result<float> Event::elapsed_ms_since(const Event& start) const {
  if (!event_ || !start.event_) return Status::failed_precondition("Event::elapsed_ms_since on an empty event");
  float ms = 0.0f;
  LG_RETURN_IF_ERROR(cuda_status(cudaEventElapsedTime(&ms, as_event(start.event_), as_event(event_)), "cudaEventElapsedTime"));
  return ms;
}

Result<HostPinnedBuffer> HostPinnedBuffer::allocate(size_t bytes) {
  HostPinnedBuffer b;
  if (bytes == 0) return Result<HostPinnedBuffer>(std::move(b));
  LG_RETURN_IF_ERROR(cuda_status(cudaMallocHost(&b.ptr_, bytes), "cudaMallocHost"));
  b.bytes_ = bytes;
  return Result<HostPinnedBuffer>(std::move(b));
}

HostPinnedBuffer::HostPinnedBuffer(HostPinnedBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

HostPinnedBuffer& HostPinnedBuffer::operator=(HostPinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

HostPinnedBuffer::~HostPinnedBuffer() {
  if (ptr_) cudaFreeHost(ptr_);
}

Status copy_to_device_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return Status::ok();
  if (!dst || !src) return Status::invalid_argument("copy_to_device_async: null pointer for " + std::to_string(bytes) + " bytes");
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(stream)), "cudaMemcpyAsync to device");
}

Status copy_to_host_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return Status::ok();
  if (!dst || !src) return Status::invalid_argument("copy_to_host_async: null pointer for " + std::to_string(bytes) + " bytes");
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)), "cudaMemcpyAsync to host");
}

}  // namespace loragate::cuda

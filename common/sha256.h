// SHA-256 (FIPS 180-4): the identity of weight files. The registry stores it
// for every adapter's adapter_model.safetensors and every base, and the
// adapter cache checks it on every load, so that a changed file is noticed.
//
// Sha256 is a plain incremental hasher owned by its caller; it is not
// thread-safe (one object per thread). The free functions are reentrant.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace loragate {

class Sha256 {
 public:
  Sha256() { reset(); }

  void reset();
  // Feeds `size` more bytes of the message.
  void update(const void* data, size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // Pads, returns the 32-byte digest and resets the hasher for a new message.
  std::array<uint8_t, 32> finish();
  // finish() as 64 lowercase hex characters.
  std::string finish_hex();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> h_{};
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;      // bytes waiting in buffer_
  uint64_t total_bytes_ = 0; // message length so far
};

// The SHA-256 of `data` as 64 lowercase hex characters.
std::string sha256_hex(std::string_view data);

// The SHA-256 of the file at `path` as 64 lowercase hex characters, read in
// 1 MiB chunks. not_found when the file does not exist, io_error when it
// cannot be opened or read (both name the path).
Result<std::string> sha256_file(const std::string& path);

}  // namespace loragate

// Safetensors files: SafetensorsFile::open() maps and validates the header
// (8-byte length, JSON, dtypes, shapes, offsets inside the data, overlaps);
// every tensor it accepts is then read at its first and last byte, so an
// offset the checks let through past the mapping crashes here.
//
// Input: byte 0 picks the form. Even: the rest is the file as it is. Odd:
// the rest is "<header JSON>\0<data>" and the 8-byte length is written for
// it, so mutations of the JSON keep a consistent length.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/safetensors.h"
#include "fuzz_util.h"

using namespace loragate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::ScratchFile file("model.safetensors");
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string bytes;
  if (data[0] & 1) {
    const auto [header, body] = fuzz::split_at_nul(rest);
    uint64_t len = header.size();
    for (int i = 0; i < 8; ++i, len >>= 8) bytes.push_back(static_cast<char>(len & 0xff));
    bytes.append(header);
    bytes.append(body);
  } else {
    bytes.assign(rest);
  }
  auto opened = SafetensorsFile::open(file.write(bytes));
  if (!opened.is_ok()) return 0;
  const SafetensorsFile& f = *opened.value();
  volatile uint8_t sink = 0;
  for (const TensorView& t : f.tensors()) {
    if (f.find(t.name) == nullptr) __builtin_trap();  // every listed tensor can be found
    (void)t.numel();
    if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
  }
  for (const auto& [k, v] : f.metadata()) sink = sink + static_cast<uint8_t>(k.size() + v.size());
  return 0;
}

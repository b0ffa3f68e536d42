// GgufWriter: writes a GGUF v3 file, the container llama.cpp loads models from.
//
// Layout (little-endian throughout), as ggml/include/gguf.h describes it:
//   "GGUF", u32 version = 3, u64 tensor count, u64 metadata count,
//   metadata: (string key, u32 value type, value)*,
//   tensor infos: (string name, u32 n_dims, u64 dims[n_dims], u32 ggml type,
//                  u64 offset into the data section)*,
//   zero padding to the alignment, then the data section, every tensor
//   starting at a multiple of the alignment.
// A string is a u64 byte length and the bytes (no terminator); an array is a
// u32 element type, a u64 count and the elements. Dims run innermost first:
// a Hugging Face [rows, cols] matrix is dims {cols, rows}.
//
// Tensors are declared with a function that produces their bytes; write()
// calls each in turn, so a multi-GB model is never held whole in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/ggml_blocks.h"
#include "common/status.h"

namespace loragate::bench {

// The value types of GGUF metadata (enum gguf_type).
enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint32_t kGgufAlignment = 32;  // written as general.alignment too

class GgufWriter {
 public:
  using TensorBytes = std::function<Result<std::vector<uint8_t>>()>;

  // Metadata, written in the order added (general.alignment comes first, always).
  GgufWriter();
  void add_string(const std::string& key, const std::string& value);
  void add_u32(const std::string& key, uint32_t value);
  void add_f32(const std::string& key, float value);
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  void add_f32_array(const std::string& key, const std::vector<float>& values);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& values);

  // Declares a tensor of `dims` (innermost first) and `type`; `bytes` must
  // produce exactly the size those imply, or write() fails naming the tensor.
  // A block type needs dims[0] to be a multiple of its block.
  Status add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type, TensorBytes bytes);

  // Writes the file; on failure no partial file is left at `path`.
  Status write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    GgmlType type;
    TensorBytes bytes;
    uint64_t size = 0;
    uint64_t offset = 0;  // into the data section
  };

  void add_key(const std::string& key, GgufValueType type);

  std::vector<uint8_t> metadata_;  // the encoded key-value pairs
  uint64_t metadata_count_ = 0;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace loragate::bench

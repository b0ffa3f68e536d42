// Safetensors reading (memory-mapped, validated) and writing.
//
// SafetensorsFile maps one file and validates its header completely before
// any tensor is used: valid JSON, known dtypes, offsets inside the file,
// sizes equal to shape × dtype, no overlaps. WeightStore joins the files of a
// model directory (single file or sharded via model.safetensors.index.json)
// into one name → tensor map. Both are immutable after open and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace loragate {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapping; valid while the owner lives
  size_t nbytes = 0;
  std::string file;               // path of the file it lives in (for error messages)

  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Every failure names the file (and the tensor).
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;  // nullptr when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The whole mapped file (header and data), e.g. to hash exactly what was parsed.
  std::string_view bytes() const { return {static_cast<const char*>(map_), map_size_}; }
  // Drops the pages wholly inside [data, data + nbytes) from this process's
  // resident memory; the bytes stay readable (a later read faults them in
  // again from the file). A loader calls it on what it has converted, so
  // that a load's peak stays near the converted weights instead of weights
  // plus file. Ignores a range not inside this mapping. Thread-safe.
  void release(const void* data, size_t nbytes) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

class WeightStore {
 public:
  // Opens `dir`/model.safetensors, or every shard listed in
  // `dir`/model.safetensors.index.json (checking each listed tensor is in
  // the shard the index names).
  static Result<std::unique_ptr<WeightStore>> open_dir(const std::string& dir);
  const TensorView* find(const std::string& name) const;
  // Finds the float (F32, F16 or BF16) tensor `name` and checks its shape;
  // the error names the tensor, the expected and the actual shape or dtype,
  // and the file.
  Result<const TensorView*> require(const std::string& name, const std::vector<int64_t>& shape) const;
  // The same for a tensor that must be of exactly `dtype`.
  Result<const TensorView*> require(const std::string& name, DType dtype, const std::vector<int64_t>& shape) const;
  // The `__metadata__` value of `key` in the first file that has it; "" when none does.
  std::string metadata(const std::string& key) const;
  std::vector<std::string> names() const;
  const std::string& dir() const { return dir_; }
  // The mapped files, in the order they were opened.
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // SafetensorsFile::release on whichever file holds [data, data + nbytes).
  void release(const void* data, size_t nbytes) const;

 private:
  Result<const TensorView*> require_any(const std::string& name, const std::vector<int64_t>& shape) const;

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> by_name_;
};

// A tensor to write: raw little-endian bytes of `dtype`.
struct TensorData {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes a safetensors file (header padded to 8 bytes, tensors in the given order).
Status write_safetensors(const std::string& path, const std::vector<TensorData>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// The name, dtype and shape of a tensor to be streamed by SafetensorsWriter.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

// Streams a safetensors file whose tensors are known up front but whose data
// is produced piece by piece (e.g. a multi-GB synthetic model): the header is
// written by create(), then append() takes the tensors' bytes in spec order,
// in chunks of any size, and finish() renames the temporary file onto `path`.
// A writer destroyed before finish() removes its temporary file.
class SafetensorsWriter {
 public:
  static Result<std::unique_ptr<SafetensorsWriter>> create(
      const std::string& path, std::vector<TensorSpec> specs,
      const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  Status append(const void* data, size_t nbytes);
  Status finish();
  uint64_t bytes_remaining() const { return data_size_ - written_; }

 private:
  SafetensorsWriter() = default;
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  uint64_t data_size_ = 0;
  uint64_t written_ = 0;
  bool finished_ = false;
};

}  // namespace loragate

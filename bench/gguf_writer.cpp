#include "bench/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace loragate::bench {
namespace {

// Appends the little-endian bytes of a fixed-size value (every target we
// build for is little-endian, as GGUF is).
template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

uint64_t align_up(uint64_t n) { return (n + kGgufAlignment - 1) / kGgufAlignment * kGgufAlignment; }

}  // namespace

GgufWriter::GgufWriter() { add_u32("general.alignment", kGgufAlignment); }

void GgufWriter::add_key(const std::string& key, GgufValueType type) {
  put_string(metadata_, key);
  put<uint32_t>(metadata_, static_cast<uint32_t>(type));
  ++metadata_count_;
}

void GgufWriter::add_string(const std::string& key, const std::string& value) {
  add_key(key, GgufValueType::kString);
  put_string(metadata_, value);
}

void GgufWriter::add_u32(const std::string& key, uint32_t value) {
  add_key(key, GgufValueType::kU32);
  put<uint32_t>(metadata_, value);
}

void GgufWriter::add_f32(const std::string& key, float value) {
  add_key(key, GgufValueType::kF32);
  put<float>(metadata_, value);
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  add_key(key, GgufValueType::kArray);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::kString));
  put<uint64_t>(metadata_, values.size());
  for (const std::string& v : values) put_string(metadata_, v);
}

void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& values) {
  add_key(key, GgufValueType::kArray);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::kF32));
  put<uint64_t>(metadata_, values.size());
  for (float v : values) put<float>(metadata_, v);
}

void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& values) {
  add_key(key, GgufValueType::kArray);
  put<uint32_t>(metadata_, static_cast<uint32_t>(GgufValueType::kI32));
  put<uint64_t>(metadata_, values.size());
  for (int32_t v : values) put<int32_t>(metadata_, v);
}

Status GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> dims, GgmlType type,
                              TensorBytes bytes) {
  if (dims.empty()) return Status::invalid_argument("GGUF tensor '" + name + "' has no dimensions");
  for (int64_t d : dims) {
    if (d <= 0) return Status::invalid_argument("GGUF tensor '" + name + "' has a dimension of " + std::to_string(d));
  }
  if (is_block_quantised(type) && dims[0] % kGgmlBlockValues != 0) {
    return Status::invalid_argument("GGUF tensor '" + name + "': " + std::string(ggml_type_name(type)) +
                                    " needs rows of a multiple of " + std::to_string(kGgmlBlockValues) +
                                    " values, and its rows have " + std::to_string(dims[0]));
  }
  uint64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= static_cast<uint64_t>(dims[i]);
  Tensor t{name, std::move(dims), type, std::move(bytes)};
  t.size = rows * ggml_row_bytes(type, t.dims[0]);
  t.offset = data_size_;
  data_size_ = align_up(data_size_ + t.size);
  tensors_.push_back(std::move(t));
  return Status::ok();
}

Status GgufWriter::write(const std::string& path) const {
  std::vector<uint8_t> head;
  head.insert(head.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(head, kGgufVersion);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, metadata_count_);
  head.insert(head.end(), metadata_.begin(), metadata_.end());
  for (const Tensor& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, static_cast<uint32_t>(t.type));
    put<uint64_t>(head, t.offset);
  }
  head.resize(align_up(head.size()), 0);

  const std::string tmp = path + ".partial";
  auto fail = [&](Status s) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return s;
  };
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return fail(Status::io_error("cannot create " + tmp));
  out.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  uint64_t written = 0;
  const std::vector<char> zeros(kGgufAlignment, 0);
  for (const Tensor& t : tensors_) {
    Result<std::vector<uint8_t>> bytes = t.bytes();
    if (!bytes.is_ok()) return fail(bytes.status());
    if (bytes.value().size() != t.size) {
      return fail(Status::internal("GGUF tensor '" + t.name + "' produced " + std::to_string(bytes.value().size()) +
                                   " bytes, its type and dims need " + std::to_string(t.size)));
    }
    out.write(reinterpret_cast<const char*>(bytes.value().data()), static_cast<std::streamsize>(t.size));
    written += t.size;
    const uint64_t pad = align_up(written) - written;
    out.write(zeros.data(), static_cast<std::streamsize>(pad));
    written += pad;
  }
  out.close();
  if (!out) return fail(Status::io_error("writing " + tmp + " failed (disk full?)"));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return fail(Status::io_error("cannot rename " + tmp + " to " + path + ": " + ec.message()));
  return Status::ok();
}

}  // namespace loragate::bench

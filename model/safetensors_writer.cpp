// Safetensors writing: a header known up front, tensors streamed after it,
// atomically (temporary file, fdatasync, rename).
#include "model/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <set>

#include <nlohmann/json.hpp>

#include "model/safetensors_detail.h"

namespace loragate {
using namespace safetensors_detail;
namespace {

using ordered_json = nlohmann::ordered_json;

Status write_all(int fd, const void* data, size_t n, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(path + ": write failed: " + errno_text(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::create(
    const std::string& path, std::vector<TensorSpec> specs,
    const std::map<std::string, std::string>& metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json md = ordered_json::object();
    for (const auto& [k, v] : metadata) md[k] = v;
    header["__metadata__"] = std::move(md);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorSpec& s : specs) {
    if (s.name.empty() || s.name == "__metadata__") {
      return Status::invalid_argument(path + ": invalid tensor name '" + s.name + "'");
    }
    if (!names.insert(s.name).second) {
      return Status::invalid_argument(path + ": tensor '" + s.name + "' given twice");
    }
    uint64_t nbytes = 0;
    if (!checked_nbytes(s.shape, s.dtype, &nbytes)) {
      return Status::invalid_argument(path + ": tensor '" + s.name + "' has invalid shape " +
                                      shape_string(s.shape));
    }
    ordered_json e = ordered_json::object();
    e["dtype"] = std::string(dtype_name(s.dtype));
    e["shape"] = s.shape;
    e["data_offsets"] = {offset, offset + nbytes};
    header[s.name] = std::move(e);
    offset += nbytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');

  static std::atomic<uint64_t> counter{0};
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  w->path_ = path;
  w->tmp_path_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  w->data_size_ = offset;
  w->fd_ = ::open(w->tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0) {
    return Status::io_error(w->tmp_path_ + ": cannot create: " + errno_text(errno));
  }
  uint8_t len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  LG_RETURN_IF_ERROR(write_all(w->fd_, len, 8, w->tmp_path_));
  LG_RETURN_IF_ERROR(write_all(w->fd_, text.data(), text.size(), w->tmp_path_));
  return w;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

Status SafetensorsWriter::append(const void* data, size_t nbytes) {
  if (finished_ || fd_ < 0) return Status::internal(path_ + ": append after finish");
  if (nbytes > data_size_ - written_) {
    return Status::invalid_argument(path_ + ": appending " + std::to_string(nbytes) +
                                    " bytes exceeds the declared tensors by " +
                                    std::to_string(nbytes - (data_size_ - written_)));
  }
  LG_RETURN_IF_ERROR(write_all(fd_, data, nbytes, tmp_path_));
  written_ += nbytes;
  return Status::ok();
}

Status SafetensorsWriter::finish() {
  if (finished_ || fd_ < 0) return Status::internal(path_ + ": finish called twice");
  if (written_ != data_size_) {
    return Status::invalid_argument(path_ + ": only " + std::to_string(written_) + " of " +
                                    std::to_string(data_size_) + " data bytes were written");
  }
  if (::fdatasync(fd_) != 0) return Status::io_error(tmp_path_ + ": sync failed: " + errno_text(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return Status::io_error(tmp_path_ + ": close failed: " + errno_text(errno));
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return Status::io_error(path_ + ": rename from temporary file failed: " + errno_text(errno));
  }
  finished_ = true;
  return Status::ok();
}

Status write_safetensors(const std::string& path, const std::vector<TensorData>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorData& t : tensors) {
    uint64_t nbytes = 0;
    if (!checked_nbytes(t.shape, t.dtype, &nbytes)) {
      return Status::invalid_argument(path + ": tensor '" + t.name + "' has invalid shape " +
                                      shape_string(t.shape));
    }
    if (t.bytes.size() != nbytes) {
      return Status::invalid_argument(path + ": tensor '" + t.name + "' has " +
                                      std::to_string(t.bytes.size()) + " bytes but shape " +
                                      shape_string(t.shape) + " of " +
                                      std::string(dtype_name(t.dtype)) + " needs " +
                                      std::to_string(nbytes));
    }
    specs.push_back({t.name, t.dtype, t.shape});
  }
  LG_ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::create(path, std::move(specs), metadata));
  for (const TensorData& t : tensors) {
    LG_RETURN_IF_ERROR(writer->append(t.bytes.data(), t.bytes.size()));
  }
  return writer->finish();
}

}  // namespace loragate

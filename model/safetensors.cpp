// Safetensors reading: validated memory-mapped files and sharded model
// directories (writing: safetensors_writer.cpp).
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "model/safetensors_detail.h"

namespace loragate {
using namespace safetensors_detail;
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

// Reads a non-negative JSON integer that fits int64.
bool get_nonneg_int(const json& j, int64_t* out) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  return false;
}

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "F32") *out = DType::kF32;
  else if (s == "F16") *out = DType::kF16;
  else if (s == "BF16") *out = DType::kBF16;
  else if (s == "I8") *out = DType::kI8;
  else if (s == "U8") *out = DType::kU8;
  else return false;
  return true;
}

// Reads a whole (small) file into `out`; not_found when it does not exist.
Status read_text_file(const std::string& path, std::string* out) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::not_found(path + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error(path + ": cannot open: " + errno_text(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::io_error(path + ": read failed");
  *out = ss.str();
  return Status::ok();
}

// A relative path with no ".." component and no root.
bool is_safe_relative(const std::string& p) {
  if (p.empty()) return false;
  if (p.find('\0') != std::string::npos) return false;
  const fs::path path(p);
  if (path.is_absolute() || path.has_root_name() || path.has_root_directory()) return false;
  for (const auto& part : path) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

namespace safetensors_detail {

std::string errno_text(int err) { return std::strerror(err); }

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool checked_nbytes(const std::vector<int64_t>& shape, DType dtype, uint64_t* out) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(dtype_size(dtype)), &n)) return false;
  *out = n;
  return true;
}

}  // namespace safetensors_detail

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------
// SafetensorsFile

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::not_found(path + ": no such file");
    return Status::io_error(path + ": cannot open: " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::io_error(path + ": cannot stat: " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid_argument(path + ": not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    return Status::corrupt(path + ": file is " + std::to_string(file_size) +
                           " bytes, too short for a safetensors header (8-byte length)");
  }
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return Status::io_error(path + ": mmap failed: " + errno_text(map_err));

  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = map;
  f->map_size_ = file_size;
  const auto* base = static_cast<const uint8_t*>(map);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > kMaxHeaderBytes) {
    return Status::corrupt(path + ": header length " + std::to_string(header_len) +
                           " exceeds the 100 MB limit");
  }
  if (header_len > file_size - 8) {
    return Status::corrupt(path + ": header length " + std::to_string(header_len) +
                           " runs past the end of the file (" + std::to_string(file_size) +
                           " bytes; file truncated?)");
  }
  const uint64_t data_size = file_size - 8 - header_len;
  const uint8_t* data_base = base + 8 + header_len;

  // Parse, noting duplicate top-level keys (nlohmann would keep only one).
  std::set<std::string> seen_keys;
  std::string duplicate_key;
  json header;
  try {
    json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
        const auto& k = parsed.get_ref<const std::string&>();
        if (!seen_keys.insert(k).second && duplicate_key.empty()) duplicate_key = k;
      }
      return true;
    };
    header = json::parse(reinterpret_cast<const char*>(base + 8),
                         reinterpret_cast<const char*>(base + 8 + header_len), cb);
  } catch (const json::exception& e) {
    return Status::corrupt(path + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return Status::corrupt(path + ": header is not a JSON object");
  if (!duplicate_key.empty()) {
    return Status::corrupt(path + ": tensor '" + duplicate_key + "' appears twice in the header");
  }

  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (entry.is_null()) continue;
        if (!entry.is_object()) return Status::corrupt(path + ": __metadata__ is not an object");
        for (const auto& [k, v] : entry.items()) {
          if (!v.is_string()) {
            return Status::corrupt(path + ": __metadata__ value for '" + k + "' is not a string");
          }
          f->metadata_[k] = v.get<std::string>();
        }
        continue;
      }
      const std::string where = path + ": tensor '" + name + "'";
      if (!entry.is_object()) return Status::corrupt(where + ": entry is not an object");
      auto dt = entry.find("dtype");
      if (dt == entry.end() || !dt->is_string()) {
        return Status::corrupt(where + ": missing or non-string 'dtype'");
      }
      TensorView view;
      view.name = name;
      view.file = path;
      const std::string dtype_str = dt->get<std::string>();
      if (!parse_dtype(dtype_str, &view.dtype)) {
        return Status::unsupported(where + ": dtype '" + dtype_str +
                                   "' is not supported (supported: F32, F16, BF16, I8, U8)");
      }
      auto sh = entry.find("shape");
      if (sh == entry.end() || !sh->is_array()) {
        return Status::corrupt(where + ": missing or non-array 'shape'");
      }
      for (const auto& d : *sh) {
        int64_t v = 0;
        if (!get_nonneg_int(d, &v)) {
          return Status::corrupt(where + ": shape must hold non-negative integers, found " +
                                 (d.is_primitive() ? d.dump() : std::string(d.type_name())));
        }
        view.shape.push_back(v);
      }
      auto off = entry.find("data_offsets");
      if (off == entry.end() || !off->is_array() || off->size() != 2) {
        return Status::corrupt(where + ": missing 'data_offsets' or it is not [begin, end]");
      }
      int64_t b = 0, e = 0;
      if (!get_nonneg_int((*off)[0], &b) || !get_nonneg_int((*off)[1], &e)) {
        return Status::corrupt(where + ": data_offsets must be two non-negative integers");
      }
      const uint64_t begin = static_cast<uint64_t>(b), end = static_cast<uint64_t>(e);
      if (begin > end) {
        return Status::corrupt(where + ": data_offsets [" + std::to_string(begin) + "," +
                               std::to_string(end) + "] has begin > end");
      }
      if (end > data_size) {
        return Status::corrupt(where + ": data_offsets end " + std::to_string(end) +
                               " is past the end of the data section (" +
                               std::to_string(data_size) + " bytes; file truncated?)");
      }
      uint64_t expect = 0;
      if (!checked_nbytes(view.shape, view.dtype, &expect)) {
        return Status::corrupt(where + ": shape " + shape_string(view.shape) +
                               " overflows the byte count");
      }
      if (end - begin != expect) {
        return Status::corrupt(where + ": data_offsets span " + std::to_string(end - begin) +
                               " bytes but shape " + shape_string(view.shape) + " of " +
                               dtype_str + " needs " + std::to_string(expect));
      }
      view.data = data_base + begin;
      view.nbytes = static_cast<size_t>(expect);
      ranges.push_back({begin, end, f->tensors_.size()});
      f->tensors_.push_back(std::move(view));
    }
  } catch (const json::exception& e) {
    return Status::corrupt(path + ": malformed header: " + e.what());
  }

  std::sort(ranges.begin(), ranges.end(), [&](const Range& a, const Range& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return f->tensors_[a.index].name < f->tensors_[b.index].name;
  });
  const Range* prev = nullptr;  // last non-empty range
  for (const Range& r : ranges) {
    if (r.begin == r.end) continue;  // empty tensors occupy no bytes
    if (prev != nullptr && r.begin < prev->end) {
      return Status::corrupt(path + ": tensors '" + f->tensors_[prev->index].name + "' [" +
                             std::to_string(prev->begin) + "," + std::to_string(prev->end) +
                             ") and '" + f->tensors_[r.index].name + "' [" +
                             std::to_string(r.begin) + "," + std::to_string(r.end) +
                             ") overlap");
    }
    prev = &r;
  }

  // tensors() lists the tensors in file order (by data offset, then name).
  std::vector<TensorView> ordered;
  ordered.reserve(ranges.size());
  for (const Range& r : ranges) ordered.push_back(std::move(f->tensors_[r.index]));
  f->tensors_ = std::move(ordered);
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  return f;
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::release(const void* data, size_t nbytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const auto map_begin = reinterpret_cast<uintptr_t>(map_);
  if (map_ == nullptr || begin < map_begin || nbytes > map_size_ || begin - map_begin > map_size_ - nbytes) return;
  // Only whole pages inside the range: a page shared with a neighbouring
  // tensor may still be needed (dropping it would be safe, only slower).
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + nbytes) / page * page;
  if (first >= last) return;
  // The mapping is private and never written, so it holds no copied pages:
  // dropping its pages loses nothing, and failure only leaves them resident.
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

// ---------------------------------------------------------------------------
// WeightStore

Result<std::unique_ptr<WeightStore>> WeightStore::open_dir(const std::string& dir) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->dir_ = dir;
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single_path = (fs::path(dir) / "model.safetensors").string();
  std::error_code ec;

  auto add_file = [&](std::unique_ptr<SafetensorsFile> file) -> Status {
    for (const TensorView& t : file->tensors()) {
      auto [it, inserted] = store->by_name_.emplace(t.name, &t);
      if (!inserted) {
        return Status::corrupt("tensor '" + t.name + "' appears in both " + it->second->file +
                               " and " + t.file);
      }
    }
    store->files_.push_back(std::move(file));
    return Status::ok();
  };

  if (fs::exists(index_path, ec)) {
    std::string text;
    LG_RETURN_IF_ERROR(read_text_file(index_path, &text));
    // shard -> the tensors the index puts there (shards opened in sorted order).
    std::map<std::string, std::vector<std::string>> shard_tensors;
    try {
      const json index = json::parse(text);
      if (!index.is_object()) return Status::corrupt(index_path + ": not a JSON object");
      auto wm = index.find("weight_map");
      if (wm == index.end() || !wm->is_object()) {
        return Status::corrupt(index_path + ": missing or non-object 'weight_map'");
      }
      for (const auto& [name, shard] : wm->items()) {
        if (!shard.is_string()) {
          return Status::corrupt(index_path + ": weight_map entry for tensor '" + name +
                                 "' is not a string");
        }
        const std::string s = shard.get<std::string>();
        if (!is_safe_relative(s)) {
          return Status::corrupt(index_path + ": tensor '" + name + "' names shard '" + s +
                                 "', which is not a plain path inside " + dir);
        }
        shard_tensors[s].push_back(name);
      }
    } catch (const json::exception& e) {
      return Status::corrupt(index_path + ": invalid JSON: " + e.what());
    }
    if (shard_tensors.empty()) return Status::corrupt(index_path + ": weight_map is empty");
    for (const auto& [shard, names] : shard_tensors) {
      const std::string shard_path = (fs::path(dir) / shard).string();
      auto file = SafetensorsFile::open(shard_path);
      if (!file.is_ok()) {
        return file.status().with_context(index_path + ": shard '" + shard + "'");
      }
      for (const std::string& name : names) {
        if ((*file)->find(name) == nullptr) {
          return Status::corrupt(index_path + ": tensor '" + name + "' is mapped to shard " +
                                 shard_path + ", which does not contain it");
        }
      }
      LG_RETURN_IF_ERROR(add_file(std::move(file).value()));
    }
    return store;
  }
  if (fs::exists(single_path, ec)) {
    LG_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(single_path));
    LG_RETURN_IF_ERROR(add_file(std::move(file)));
    return store;
  }
  return Status::not_found("no model.safetensors or model.safetensors.index.json in " + dir);
}

const TensorView* WeightStore::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<const TensorView*> WeightStore::require_any(const std::string& name,
                                                   const std::vector<int64_t>& shape) const {
  const TensorView* t = find(name);
  if (t == nullptr) return Status::not_found("tensor '" + name + "' missing from " + dir_);
  if (t->shape != shape) {
    return Status::invalid_argument("tensor '" + name + "' in " + t->file + " has shape " +
                                    shape_string(t->shape) + ", expected " + shape_string(shape));
  }
  return t;
}

Result<const TensorView*> WeightStore::require(const std::string& name,
                                               const std::vector<int64_t>& shape) const {
  LG_ASSIGN_OR_RETURN(const TensorView* t, require_any(name, shape));
  if (!is_float_dtype(t->dtype)) {
    return Status::invalid_argument("tensor '" + name + "' in " + t->file + " is " +
                                    std::string(dtype_name(t->dtype)) +
                                    ", expected a float tensor (F32, F16 or BF16)");
  }
  return t;
}

Result<const TensorView*> WeightStore::require(const std::string& name, DType dtype,
                                               const std::vector<int64_t>& shape) const {
  LG_ASSIGN_OR_RETURN(const TensorView* t, require_any(name, shape));
  if (t->dtype != dtype) {
    return Status::invalid_argument("tensor '" + name + "' in " + t->file + " is " +
                                    std::string(dtype_name(t->dtype)) + ", expected " +
                                    std::string(dtype_name(dtype)));
  }
  return t;
}

std::string WeightStore::metadata(const std::string& key) const {
  for (const auto& file : files_) {
    auto it = file->metadata().find(key);
    if (it != file->metadata().end()) return it->second;
  }
  return "";
}

void WeightStore::release(const void* data, size_t nbytes) const {
  for (const auto& file : files_) file->release(data, nbytes);
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [name, view] : by_name_) out.push_back(name);
  return out;
}

}  // namespace loragate

// Helpers the fuzz targets share: where ../shared is, a scratch file that
// path-based loaders can read, and splitting one input into parts.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

namespace loragate::fuzz {

// The shared fixtures: $LORAGATE_SHARED, else the ../shared next to the sources.
inline std::string shared_dir() {
  const char* env = std::getenv("LORAGATE_SHARED");
  return env != nullptr && *env != '\0' ? env : LORAGATE_SHARED_DIR;
}

inline bool file_exists(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

// A file under $TMPDIR (else /dev/shm, else /tmp) rewritten with each input,
// for loaders that take a path. Removed at exit.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string root = tmp != nullptr && *tmp != '\0' ? tmp : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    dir_ = root + "/loragate-fuzz-XXXXXX";
    if (::mkdtemp(dir_.data()) == nullptr) std::abort();
    path_ = dir_ + "/" + name;
  }
  ~ScratchFile() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& write(std::string_view bytes) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) std::abort();
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    return path_;
  }
  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string path_;
};

// Splits at the first NUL byte: {before, after} (after is empty without one).
inline std::pair<std::string_view, std::string_view> split_at_nul(std::string_view in) {
  const size_t nul = in.find('\0');
  if (nul == std::string_view::npos) return {in, {}};
  return {in.substr(0, nul), in.substr(nul + 1)};
}

}  // namespace loragate::fuzz

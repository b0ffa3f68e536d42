// Durable file writes: temporary file, fsync, rename, directory fsync.
#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace loragate {
namespace {

std::string atomic_file_errno(int err) { return std::strerror(err); }

}  // namespace

Status sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::io_error(dir + ": cannot open directory to sync: " + atomic_file_errno(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems cannot sync a directory (EINVAL); their renames are as
  // durable as they get.
  if (rc != 0 && err != EINVAL) return Status::io_error(dir + ": directory sync failed: " + atomic_file_errno(err));
  return Status::ok();
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(tmp + ": cannot create: " + atomic_file_errno(errno));
  auto fail = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::io_error(tmp + ": " + what + ": " + atomic_file_errno(err));
  };
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return fail("write failed");
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) return fail("sync failed");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::io_error(tmp + ": close failed: " + atomic_file_errno(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::io_error(path + ": rename from temporary file failed: " + atomic_file_errno(err));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return sync_directory(dir);
}

}  // namespace loragate

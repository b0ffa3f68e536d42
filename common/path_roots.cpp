#include "common/path_roots.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace loragate {

namespace fs = std::filesystem;

bool path_is_inside(const std::string& path, const std::string& root) {
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          (path[root.size()] == '/' || root == "/"));
}

Result<std::string> resolve_inside_roots(const std::string& path, const std::vector<std::string>& roots,
                                         const std::string& what, const std::string& key) {
  if (roots.empty()) {
    return Status::invalid_argument("no " + what + " roots are configured (" + key + "): registration is disabled");
  }
  if (!fs::path(path).is_absolute()) {
    return Status::invalid_argument(what + " path '" + path + "' is relative; give an absolute path inside a " +
                                    what + " root (" + key + ")");
  }
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (!ec) {
    for (const std::string& root : roots) {
      const fs::path real_root = fs::canonical(root, ec);
      if (!ec && path_is_inside(real.string(), real_root.string())) return real.string();
    }
  }
  // Missing or outside: one answer, and never where a link leads.
  return Status::invalid_argument(what + " path '" + path + "' does not exist or is outside every configured " +
                                  what + " root (" + key + ")");
}

namespace {

// The file systems whose files are the kernel's views, not stored bytes:
// their sizes are 0 or a page whatever they hold.
bool is_pseudo_file_system(const struct statfs& info) {
  switch (static_cast<unsigned long>(info.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case BPF_FS_MAGIC:
      return true;
    default:
      return false;
  }
}

// Closes a descriptor when it goes out of scope.
struct ScopedFd {
  int fd;
  ~ScopedFd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<std::string> read_regular_file(const std::string& path, int64_t max_bytes, const std::string& what,
                                      const std::vector<std::string>& roots) {
  const std::string named = what + " " + path;
  // O_PATH first: it opens nothing for reading, so a FIFO does not wait for a
  // writer and a device's open (a tape that rewinds) has no effect.
  const int probe = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (probe < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return Status::not_found("cannot read " + named + ": no such file");
    return Status::io_error("cannot read " + named + ": " + std::strerror(err));
  }
  ScopedFd close_probe{probe};
  if (!roots.empty()) {
    // The file opened, not the path resolved before: a link swapped in since is caught here.
    std::error_code ec;
    const fs::path real = fs::read_symlink("/proc/self/fd/" + std::to_string(probe), ec);
    bool inside = false;
    for (const std::string& root : roots) {
      const fs::path real_root = fs::canonical(root, ec);
      inside = inside || (!ec && !real.empty() && path_is_inside(real.string(), real_root.string()));
    }
    if (!inside) return Status::invalid_argument(named + " does not exist or is outside every configured root");
  }
  struct stat st {};
  struct statfs fsinfo {};
  if (::fstat(probe, &st) != 0 || ::fstatfs(probe, &fsinfo) != 0) {
    return Status::io_error("cannot read " + named + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return Status::invalid_argument(named + " is a directory, not a file");
  if (!S_ISREG(st.st_mode)) {
    return Status::invalid_argument(named + " is not a regular file (a FIFO, device or socket is never read)");
  }
  if (is_pseudo_file_system(fsinfo)) {
    return Status::invalid_argument(named + " is a pseudo-file of the kernel (/proc, /sys), not a stored file");
  }
  const std::string limit = "over the limit of " + std::to_string(max_bytes) + " bytes";
  if (st.st_size > max_bytes) {
    return Status::invalid_argument(named + " is " + std::to_string(st.st_size) + " bytes, " + limit);
  }
  // Now for reading, still non-blocking, and it must be the file just checked.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  ScopedFd close_fd{fd};
  struct stat again {};
  if (fd < 0 || ::fstat(fd, &again) != 0) return Status::io_error("cannot read " + named + ": " + std::strerror(errno));
  if (again.st_dev != st.st_dev || again.st_ino != st.st_ino) {
    return Status::invalid_argument(named + " was replaced while it was opened");
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  for (;;) {
    // One byte of room past the size fstat gave, to see a file that grew.
    if (done == bytes.size()) bytes.resize(std::min<size_t>(bytes.size() + 65536, static_cast<size_t>(max_bytes) + 1));
    if (done == bytes.size()) return Status::invalid_argument(named + " grew while read, " + limit);
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::io_error("error reading " + named + ": " + std::strerror(errno));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace loragate

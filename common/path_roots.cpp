#include "common/path_roots.h"

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

}  // namespace loragate

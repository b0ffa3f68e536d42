#include "adapters/adapter_dir.h"

#include <filesystem>

#include "common/path_roots.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

// The one message for anything outside: it names what was asked for, never where it leads.
Status outside(const std::string& shown) {
  return Status::invalid_argument(shown + ": resolves outside the adapter directory; every adapter file must lie inside it");
}

}  // namespace

std::string adapter_confinement_for(const std::string& dir) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  if (!ec) return real.string();
  return fs::absolute(dir, ec).lexically_normal().string();
}

Result<AdapterDir> AdapterDir::open(const std::string& dir, const std::string& confined_to) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(real, ec)) return Status::not_found(dir + ": adapter directory not found");
  const std::string root = confined_to.empty() ? real.string() : confined_to;
  if (!path_is_inside(real.string(), root)) return outside(dir);  // swapped for a link since it was registered
  return AdapterDir(dir, real.string(), root);
}

bool AdapterDir::has(const std::string& name) const {
  std::error_code ec;
  const fs::file_type type = fs::symlink_status(fs::path(real_) / name, ec).type();
  return type != fs::file_type::not_found && type != fs::file_type::none;
}

Result<std::string> AdapterDir::file(const std::string& name) const {
  const std::string shown = (fs::path(path_) / name).string();
  if (!has(name)) return Status::not_found(shown + ": not found");
  std::error_code ec;
  const fs::path real = fs::canonical(fs::path(real_) / name, ec);
  if (ec || !path_is_inside(real.string(), root_)) return outside(shown);
  if (!fs::is_regular_file(real, ec)) return Status::invalid_argument(shown + ": is not a regular file");
  return real.string();
}

}  // namespace loragate

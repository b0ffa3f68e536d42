#include "cli/history_db.h"

#include <filesystem>

#include "registry/registry.h"

namespace loragate::cli {

std::string reports_dir_for(const std::string& db) {
  const std::filesystem::path file = is_postgres_url(db) ? std::filesystem::path(kOfflineHistoryDb) : std::filesystem::path(db);
  return (file.parent_path() / "reports").string();
}

void make_parent_folder(const std::string& path) {
  if (is_postgres_url(path)) return;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;  // a folder that cannot be made fails the open after, naming the file
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
}

}  // namespace loragate::cli

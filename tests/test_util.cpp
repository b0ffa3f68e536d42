#include "tests/test_util.h"

#include <cstdlib>
#include <filesystem>

namespace loragate::testing {

std::string shared_dir() {
  if (const char* env = std::getenv("LORAGATE_SHARED_DIR"); env && *env) return env;
  return LORAGATE_SHARED_DIR;
}

bool shared_exists(const std::string& relative) {
  return std::filesystem::exists(std::filesystem::path(shared_dir()) / relative);
}

std::string make_temp_dir(const std::string& prefix) {
  std::string templ = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  char* made = mkdtemp(templ.data());
  return made ? std::string(made) : std::string();
}

}  // namespace loragate::testing

#include "tests/test_util.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace loragate::testing {

std::string shared_dir() {
  if (const char* env = std::getenv("LORAGATE_SHARED_DIR"); env && *env) return env;
  return LORAGATE_SHARED_DIR;
}

bool shared_exists(const std::string& relative) {
  return std::filesystem::exists(std::filesystem::path(shared_dir()) / relative);
}

bool in_ci() {
  const char* env = std::getenv("CI");
  return env != nullptr && std::string(env) == "true";
}

std::string missing_fixture_message(const std::string& relative) {
  std::string m = "shared test data not found: " + shared_dir() + "/" + relative;
  if (in_ci()) return m + " (CI=true: a missing fixture fails; fetch ../shared or set LORAGATE_SHARED_DIR)";
  return m + " (skipped; set LORAGATE_SHARED_DIR, and with CI=true this fails)";
}

std::string make_temp_dir(const std::string& prefix) {
  std::string templ = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  char* made = mkdtemp(templ.data());
  return made ? std::string(made) : std::string();
}

void flip_last_bit(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-1, std::ios::end);
  const char last = static_cast<char>(f.get());
  f.seekp(-1, std::ios::end);
  f.put(static_cast<char>(last ^ 0x01));
}

std::pair<int, std::string> run_command(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace loragate::testing

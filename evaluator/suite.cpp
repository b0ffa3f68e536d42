// Reading a suite in its two phases (suite.h): the YAML with every path it
// names resolved and confined, then the files, capped and hashed.
#include "evaluator/suite.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "common/path_roots.h"
#include "common/sha256.h"

namespace loragate::eval {
namespace {

// The real path of a file the suite names. With roots it must lie inside one
// (one answer for missing and outside, as for the suite itself); without,
// a path that does not resolve is kept for the read to report.
Result<std::string> real_path(const std::string& path, const std::vector<std::string>& roots) {
  if (!roots.empty()) return resolve_inside_roots(path, roots, "evaluation", "evaluation.roots");
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  return ec ? path : real.string();
}

// Reads one file the suite names, counting its bytes against what is `left`
// of the suite's budget.
Result<std::string> read_named(const std::string& path, const std::string& what, const std::vector<std::string>& roots,
                               int64_t* left) {
  LG_ASSIGN_OR_RETURN(std::string bytes, read_regular_file(path, kMaxItemFileBytes, what, roots));
  if (static_cast<int64_t>(bytes.size()) > *left) {
    return Status::invalid_argument(what + " " + path + " takes the suite's files past " +
                                    std::to_string(kMaxSuiteBytes) + " bytes together");
  }
  *left -= static_cast<int64_t>(bytes.size());
  return bytes;
}

}  // namespace

Result<Suite> read_suite_spec(const std::string& path, const std::vector<std::string>& roots) {
  LG_ASSIGN_OR_RETURN(std::string text, read_regular_file(path, kMaxSuiteFileBytes, "suite file", roots));
  LG_ASSIGN_OR_RETURN(Suite suite, parse_suite_spec(std::move(text), path));
  for (ScenarioSpec& s : suite.scenarios) {
    Result<std::string> real = real_path(s.eval_path, roots);
    if (!real.is_ok()) return real.status().with_context(path + ": scenarios." + s.name + ".eval");
    s.eval_path = *real;
  }
  if (!suite.generic_path.empty()) {
    Result<std::string> real = real_path(suite.generic_path, roots);
    if (!real.is_ok()) return real.status().with_context(path + ": generic");
    suite.generic_path = *real;
  }
  return suite;
}

Status load_suite_items(Suite* suite, const std::vector<std::string>& roots) {
  Sha256 hash;
  hash.update(std::string_view("loragate-suite\0", 15));
  hash.update(suite->text);
  int64_t left = kMaxSuiteBytes - static_cast<int64_t>(suite->text.size());
  for (ScenarioSpec& s : suite->scenarios) {
    LG_ASSIGN_OR_RETURN(std::string bytes, read_named(s.eval_path, "eval file", roots, &left));
    hash.update(std::string_view("\0eval\0", 6));
    hash.update(s.name);
    hash.update(std::string_view("\0", 1));
    hash.update(std::to_string(bytes.size()));
    hash.update(std::string_view("\0", 1));
    hash.update(bytes);
    LG_ASSIGN_OR_RETURN(s.items, parse_eval_items(bytes, s.eval_path));
  }
  if (!suite->generic_path.empty()) {
    LG_ASSIGN_OR_RETURN(std::string bytes, read_named(suite->generic_path, "generic file", roots, &left));
    hash.update(std::string_view("\0generic\0", 9));
    hash.update(std::to_string(bytes.size()));
    hash.update(std::string_view("\0", 1));
    hash.update(bytes);
    LG_ASSIGN_OR_RETURN(suite->generic, parse_generic_items(bytes, suite->generic_path));
  }
  suite->content_sha256 = hash.finish_hex();
  return Status::ok();
}

Result<Suite> load_suite(const std::string& path, const std::vector<std::string>& roots) {
  LG_ASSIGN_OR_RETURN(Suite suite, read_suite_spec(path, roots));
  LG_RETURN_IF_ERROR(load_suite_items(&suite, roots));
  return suite;
}

std::string suite_sha256(const Suite& suite) {
  return suite.content_sha256.empty() ? sha256_hex(suite.text) : suite.content_sha256;
}

}  // namespace loragate::eval

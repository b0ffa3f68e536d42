// AdapterDir: one PEFT adapter directory whose files are confined to it.
//
// Every file an adapter load opens is found through here. Its real path
// (every symlink resolved) must lie inside the confinement directory: the
// adapter directory's real path as it was registered, so a directory swapped
// for a link later is refused too. A link that leads out gets one message
// whether its target exists or not, so an error never tells what exists
// outside. Callers open the real path returned, never the name they asked for.
// Immutable; thread-safe.
#pragma once

#include <string>

#include "common/status.h"

namespace loragate {

class AdapterDir {
 public:
  // `dir` must be an existing directory (else kNotFound). `confined_to` is the
  // directory its files must lie in ("" = the real path of `dir` now).
  static Result<AdapterDir> open(const std::string& dir, const std::string& confined_to = "");

  // The path the caller gave, for messages.
  const std::string& path() const { return path_; }
  // The directory's real path.
  const std::string& real_path() const { return real_; }
  // The real path of the regular file `name` in the directory: kNotFound when
  // absent, kInvalidArgument when it resolves outside the confinement
  // directory (dangling or not) or is not a regular file.
  Result<std::string> file(const std::string& name) const;
  // Whether `name` is present (a file or a link, followed or not).
  bool has(const std::string& name) const;

 private:
  AdapterDir(std::string path, std::string real, std::string root)
      : path_(std::move(path)), real_(std::move(real)), root_(std::move(root)) {}

  std::string path_, real_, root_;
};

// The directory an adapter registered from `dir` is confined to: its real
// path, or, while it does not exist, its absolute normal form.
std::string adapter_confinement_for(const std::string& dir);

}  // namespace loragate

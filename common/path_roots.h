// Paths confined to configured root directories (adapters.roots, bases.roots,
// evaluation.roots): what a client may name on the admin API.
//
// A path must be absolute (a relative one would depend on the server's
// working directory) and its real path, every "..", "." and symlink resolved,
// must lie inside a root. A path that does not exist and one outside every
// root get the same code and message, so an answer never tells what exists
// outside the roots.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace loragate {

// True when real path `path` is `root` or lies below it (both real and absolute).
bool path_is_inside(const std::string& path, const std::string& root);

// The real path of `path` when it exists inside one of `roots`; `what` names
// the kind of path in errors ("adapter") and `key` the config key of the roots.
Result<std::string> resolve_inside_roots(const std::string& path, const std::vector<std::string>& roots,
                                         const std::string& what, const std::string& key);

}  // namespace loragate

// Paths confined to configured root directories (adapters.roots, bases.roots,
// evaluation.roots): what a client may name on the admin API.
//
// A path must be absolute (a relative one would depend on the server's
// working directory) and its real path, every "..", "." and symlink resolved,
// must lie inside a root. A path that does not exist and one outside every
// root get the same code and message, so an answer never tells what exists
// outside the roots.
//
// read_regular_file() is how such a path is read: only a regular file on an
// ordinary file system, with a size cap, so that a named FIFO, device or
// /proc file can neither block a thread nor grow memory.
#pragma once

#include <cstdint>
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

// The bytes of `path` when it is a regular file of at most `max_bytes` on an
// ordinary file system. Checked on a descriptor opened with O_PATH, which
// reads nothing (a FIFO never waits for a writer, a device's open has no
// effect): a directory, FIFO, device, socket, or a pseudo-file of /proc or
// /sys (their sizes mean nothing) is refused without reading a byte; a file
// over the cap (by its size, or one growing while it is read) is refused.
// Only then is it opened for reading (non-blocking), and it must be the same
// file. With `roots`, the opened file's real path must lie inside one of
// them, so a link swapped in after the path was resolved is refused too.
// `what` names the file in errors ("eval file"); errors never quote its content.
Result<std::string> read_regular_file(const std::string& path, int64_t max_bytes, const std::string& what,
                                      const std::vector<std::string>& roots = {});

}  // namespace loragate

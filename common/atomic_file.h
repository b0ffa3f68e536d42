// Durable file writes: a file that is either wholly the old version or wholly
// the new one after a crash, and directory syncs that make renames durable.
//
// Free functions over paths; reentrant (temporary names are unique per
// process and call).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace loragate {

// Writes `bytes` to a temporary file beside `path`, fsyncs it and renames it
// over `path`, then fsyncs the directory. The temporary file is removed on
// failure. Errors name the path and the system's reason.
Status write_file_atomic(const std::string& path, std::string_view bytes);

// fsyncs the directory `dir`, so that the names created, renamed or removed
// in it survive a crash.
Status sync_directory(const std::string& dir);

}  // namespace loragate

// Where the command line keeps state when no server is involved, and the
// one way it makes the folder of a registry or history file.
#pragma once

#include <string>

namespace loragate::cli {

// The offline evaluation history: `eval run|ls|show` and `upgrade --online`
// keep their runs here unless --db names another file (a server's registry,
// to be judged against what it recorded). Its own file, so an offline run is
// never compared with a server's history by accident.
inline constexpr const char* kOfflineHistoryDb = ".cache/loragate/eval/history.db";

// Where the reports of runs stored in `db` go by default: reports/ beside a
// SQLite file, the offline history's folder for a PostgreSQL URL.
std::string reports_dir_for(const std::string& db);

// Makes the folder that will hold the SQLite file `path`; a PostgreSQL URL
// names a server, not a folder, and is left alone.
void make_parent_folder(const std::string& path);

}  // namespace loragate::cli

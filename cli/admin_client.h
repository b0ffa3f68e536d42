// The admin CLI's client side, shared by `loragate adapter|scenario|base`:
// the --url/--token/--json/--timeout options, one admin call to a running
// server, and the table and cell formatting of listings.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace loragate::cli {

struct AdminOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string token;
  bool json = false;
  double timeout_s = 30;
  double wait_s = 15;  // --wait: how long a refused connection is retried (a server still starting)
  std::string base;  // --base where a command takes one; "" = the serving base
};

// --url, --token, --json, --timeout and --wait on one leaf command.
std::shared_ptr<AdminOptions> add_admin_options(CLI::App* cmd);
// --base on a command that acts on one base generation.
void add_base_option(CLI::App* cmd, AdminOptions& o);
// Who runs the command, for the swap history: $USER, else "cli".
std::string env_actor();
// "?base=NAME" when --base was given, else "".
std::string base_query(const AdminOptions& o);

// One admin call: the parsed JSON body of a 2xx response, else a Status whose
// message is the server's ("404: adapter 'x' is not registered"). A refused
// connection is retried for --wait seconds, so a command run right after
// `serve ... &` finds the server once it listens.
Result<nlohmann::json> admin_call(const AdminOptions& o, const std::string& method, const std::string& target,
                                  const nlohmann::json& body = nullptr);

// Runs a command body; a failure prints "loragate: <message>" and exits non-zero.
void run(const std::function<Status()>& body);

// A JSON value as a table cell: strings as they are, arrays joined by ',',
// null or missing as '-'.
std::string cell(const nlohmann::json& obj, const char* key);
// obj[key] (bytes) as "1.2 MiB"; "-" when absent.
std::string human_size(const nlohmann::json& obj, const char* key = "size_bytes");
// Unix seconds as "2026-12-07 21:30:05 UTC (4 min ago)"; "-" for 0.
std::string human_time(int64_t unix_seconds);
// obj[key] (unix seconds) as human_time; "-" when absent.
std::string human_time(const nlohmann::json& obj, const char* key);
// Columns padded to their widest cell, two spaces apart; the last unpadded.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
// j["data"] when it is a list, else an empty list.
const nlohmann::json& list_data(const nlohmann::json& j);

}  // namespace loragate::cli

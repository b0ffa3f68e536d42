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
  std::string base;  // --base where a command takes one; "" = the serving base
};

// --url, --token, --json and --timeout on one leaf command.
std::shared_ptr<AdminOptions> add_admin_options(CLI::App* cmd);
// --base on a command that acts on one base generation.
void add_base_option(CLI::App* cmd, AdminOptions& o);
// Who runs the command, for the swap history: $USER, else "cli".
std::string env_actor();
// "?base=NAME" when --base was given, else "".
std::string base_query(const AdminOptions& o);

// One admin call: the parsed JSON body of a 2xx response, else a Status whose
// message is the server's ("404: adapter 'x' is not registered").
Result<nlohmann::json> admin_call(const AdminOptions& o, const std::string& method, const std::string& target,
                                  const nlohmann::json& body = nullptr);

// Runs a command body; a failure prints "loragate: <message>" and exits non-zero.
void run(const std::function<Status()>& body);

// A JSON value as a table cell: strings as they are, arrays joined by ',',
// null or missing as '-'.
std::string cell(const nlohmann::json& obj, const char* key);
// obj[key] (bytes) as "1.2 MiB"; "-" when absent.
std::string human_size(const nlohmann::json& obj, const char* key = "size_bytes");
// Columns padded to their widest cell, two spaces apart; the last unpadded.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
// j["data"] when it is a list, else an empty list.
const nlohmann::json& list_data(const nlohmann::json& j);

}  // namespace loragate::cli

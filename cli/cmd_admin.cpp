// `loragate adapter add|rm|ls` and `loragate scenario set|rm|ls`: the admin
// API of a running server (/admin/adapters, /admin/scenarios).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "client/http_client.h"

namespace loragate::cli {

namespace {

using nlohmann::json;

struct AdminOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string token;
  bool json = false;
  double timeout_s = 30;
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// --url, --token, --json and --timeout on one leaf command.
std::shared_ptr<AdminOptions> add_admin_options(CLI::App* cmd) {
  auto o = std::make_shared<AdminOptions>();
  o->url = env_or("LORAGATE_URL", o->url);
  o->token = env_or("LORAGATE_ADMIN_TOKEN", "");
  cmd->add_option("--url", o->url, "Server base URL (default $LORAGATE_URL or http://127.0.0.1:8000)");
  cmd->add_option("--token", o->token, "Admin bearer token (default $LORAGATE_ADMIN_TOKEN)");
  cmd->add_flag("--json", o->json, "Print the server's JSON");
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for the server")->check(CLI::PositiveNumber);
  return o;
}

// One admin call: the parsed JSON body of a 2xx response, else a Status whose
// message is the server's ("404: adapter 'x' is not registered").
Result<json> admin_call(const AdminOptions& o, const std::string& method, const std::string& target,
                        const json& body = nullptr) {
  client::ClientOptions copts;
  copts.read_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  copts.total_timeout = copts.read_timeout;
  LG_ASSIGN_OR_RETURN(auto http, client::HttpClient::create(o.url, copts));
  client::Headers headers;
  if (!o.token.empty()) headers.emplace_back("Authorization", "Bearer " + o.token);
  LG_ASSIGN_OR_RETURN(auto res, http.request(method, target, body.is_null() ? std::string() : body.dump(), headers));
  Status s = client::status_from_http(res);
  if (!s.is_ok()) {
    if ((res.status == 401 || res.status == 403) && o.token.empty()) {
      return Status::invalid_argument(s.message() + " (pass --token or set LORAGATE_ADMIN_TOKEN)");
    }
    return s;
  }
  if (res.body.empty()) return json(nullptr);
  json j = json::parse(res.body, nullptr, false);
  if (j.is_discarded()) return Status::corrupt(method + " " + target + ": the server's answer is not JSON");
  return j;
}

// Runs a command body; a failure prints "loragate: <message>" and exits non-zero.
void run(const std::function<Status()>& body) {
  Status s = body();
  if (!s.is_ok()) throw CLI::RuntimeError(fail(s.message()));
}

// A JSON value as a table cell: strings as they are, arrays joined by ',',
// null or missing as '-'.
std::string cell(const json& obj, const char* key) {
  if (!obj.is_object()) return "-";
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return "-";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string out;
    for (const json& e : *it) {
      if (!out.empty()) out += ",";
      out += e.is_string() ? e.get<std::string>() : e.dump();
    }
    return out.empty() ? "-" : out;
  }
  return it->dump();
}

std::string human_size(const json& obj) {
  if (!obj.is_object() || !obj.contains("size_bytes") || !obj["size_bytes"].is_number()) return "-";
  double v = obj["size_bytes"].get<double>();
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// Columns padded to their widest cell, two spaces apart; the last unpadded.
void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t c = 0; c < r.size(); ++c) {
      out += r[c];
      if (c + 1 < r.size()) out += std::string(width[c] - r[c].size() + 2, ' ');
    }
    std::cout << out << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
}

const json& list_data(const json& j) {
  static const json kEmpty = json::array();
  if (j.is_object() && j.contains("data") && j["data"].is_array()) return j["data"];
  return kEmpty;
}

void add_adapter_commands(CLI::App& app) {
  CLI::App* adapter = app.add_subcommand("adapter", "Register, remove and list a running server's LoRA adapters");
  adapter->require_subcommand(1);

  {
    CLI::App* cmd = adapter->add_subcommand("add", "Register an adapter (a PEFT directory the server can read)");
    auto o = add_admin_options(cmd);
    auto name = std::make_shared<std::string>();
    auto path = std::make_shared<std::string>();
    cmd->add_option("NAME", *name, "Adapter name")->required();
    cmd->add_option("PATH", *path, "Adapter directory, as the server sees it")->required();
    cmd->callback([o, name, path] {
      run([&]() -> Status {
        // A relative path that exists here is made absolute: the server does
        // not share our working directory.
        std::string p = *path;
        std::error_code ec;
        if (std::filesystem::path(p).is_relative() && std::filesystem::exists(p, ec)) {
          p = std::filesystem::absolute(p, ec).lexically_normal().string();
        }
        LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "POST", "/admin/adapters", {{"name", *name}, {"path", p}}));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
          return Status::ok();
        }
        std::string sha = cell(j, "sha256");
        if (sha.size() > 12) sha = sha.substr(0, 12);
        std::cout << "added adapter '" << cell(j, "name") << "': rank " << cell(j, "rank") << ", alpha "
                  << cell(j, "alpha") << ", targets " << cell(j, "target_modules") << ", " << human_size(j)
                  << ", sha256 " << sha << ", base " << cell(j, "base_model") << "\n";
        return Status::ok();
      });
    });
  }
  {
    CLI::App* cmd = adapter->add_subcommand("rm", "Unregister an adapter");
    auto o = add_admin_options(cmd);
    auto name = std::make_shared<std::string>();
    cmd->add_option("NAME", *name, "Adapter name")->required();
    cmd->callback([o, name] {
      run([&]() -> Status {
        LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "DELETE", "/admin/adapters/" + client::url_encode_segment(*name)));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
        } else {
          std::cout << "removed adapter '" << *name << "'\n";
        }
        return Status::ok();
      });
    });
  }
  {
    CLI::App* cmd = adapter->add_subcommand("ls", "List registered adapters");
    auto o = add_admin_options(cmd);
    cmd->callback([o] {
      run([&]() -> Status {
        LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "GET", "/admin/adapters"));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
          return Status::ok();
        }
        const json& data = list_data(j);
        if (data.empty()) {
          std::cout << "no adapters registered\n";
          return Status::ok();
        }
        std::vector<std::vector<std::string>> rows;
        std::vector<std::string> errors;
        for (const json& a : data) {
          rows.push_back({cell(a, "name"), cell(a, "rank"), cell(a, "alpha"), cell(a, "target_modules"),
                          cell(a, "cache_tier"), cell(a, "state"), cell(a, "requests"), human_size(a),
                          cell(a, "path")});
          if (a.is_object() && a.contains("load_error") && !a["load_error"].is_null()) {
            errors.push_back(cell(a, "name") + ": load error: " + cell(a, "load_error"));
          }
        }
        print_table({"NAME", "RANK", "ALPHA", "TARGETS", "TIER", "STATE", "REQUESTS", "SIZE", "PATH"}, rows);
        for (const std::string& e : errors) std::cout << e << "\n";
        return Status::ok();
      });
    });
  }
}

void add_scenario_commands(CLI::App& app) {
  CLI::App* scenario = app.add_subcommand("scenario", "Point named scenarios of a running server at adapters");
  scenario->require_subcommand(1);

  {
    CLI::App* cmd = scenario->add_subcommand("set", "Create or repoint a scenario");
    auto o = add_admin_options(cmd);
    auto name = std::make_shared<std::string>();
    auto adapter = std::make_shared<std::string>();
    cmd->add_option("NAME", *name, "Scenario name")->required();
    cmd->add_option("ADAPTER", *adapter, "Registered adapter the scenario uses")->required();
    cmd->callback([o, name, adapter] {
      run([&]() -> Status {
        LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "PUT", "/admin/scenarios/" + client::url_encode_segment(*name),
                                               {{"adapter", *adapter}}));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
        } else {
          std::cout << "scenario '" << cell(j, "name") << "' -> adapter '" << cell(j, "adapter") << "' (base "
                    << cell(j, "base_model") << ")\n";
        }
        return Status::ok();
      });
    });
  }
  {
    CLI::App* cmd = scenario->add_subcommand("rm", "Remove a scenario");
    auto o = add_admin_options(cmd);
    auto name = std::make_shared<std::string>();
    cmd->add_option("NAME", *name, "Scenario name")->required();
    cmd->callback([o, name] {
      run([&]() -> Status {
        LG_ASSIGN_OR_RETURN(json j,
                            admin_call(*o, "DELETE", "/admin/scenarios/" + client::url_encode_segment(*name)));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
        } else {
          std::cout << "removed scenario '" << *name << "'\n";
        }
        return Status::ok();
      });
    });
  }
  {
    CLI::App* cmd = scenario->add_subcommand("ls", "List scenarios");
    auto o = add_admin_options(cmd);
    cmd->callback([o] {
      run([&]() -> Status {
        LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "GET", "/admin/scenarios"));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
          return Status::ok();
        }
        const json& data = list_data(j);
        if (data.empty()) {
          std::cout << "no scenarios\n";
          return Status::ok();
        }
        std::vector<std::vector<std::string>> rows;
        for (const json& s : data) {
          rows.push_back({cell(s, "name"), cell(s, "adapter"), cell(s, "base_model"), cell(s, "updated_at")});
        }
        print_table({"NAME", "ADAPTER", "BASE", "UPDATED"}, rows);
        return Status::ok();
      });
    });
  }
}

}  // namespace

void add_admin_commands(CLI::App& app) {
  add_adapter_commands(app);
  add_scenario_commands(app);
}

}  // namespace loragate::cli

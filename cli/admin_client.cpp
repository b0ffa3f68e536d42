#include "cli/admin_client.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "client/http_client.h"

namespace loragate::cli {

using nlohmann::json;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

}  // namespace

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

Result<json> admin_call(const AdminOptions& o, const std::string& method, const std::string& target,
                        const json& body) {
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

void run(const std::function<Status()>& body) {
  Status s = body();
  if (!s.is_ok()) throw CLI::RuntimeError(fail(s.message()));
}

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

std::string human_size(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return "-";
  double v = obj[key].get<double>();
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

void add_base_option(CLI::App* cmd, AdminOptions& o) {
  cmd->add_option("--base", o.base, "Base generation to act on (default: the serving base)");
}

std::string env_actor() { return env_or("USER", "cli"); }

std::string base_query(const AdminOptions& o) {
  return o.base.empty() ? "" : "?base=" + client::url_encode_segment(o.base);
}

}  // namespace loragate::cli

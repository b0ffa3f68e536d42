#include "cli/admin_client.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <thread>

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
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for the server's answer")->check(CLI::PositiveNumber);
  cmd->add_option("--wait", o->wait_s, "Seconds to keep retrying while the server refuses connections (starting)")
      ->check(CLI::NonNegativeNumber);
  return o;
}

namespace {

// One request, retried while the connection is refused: a server started in
// the background a moment ago does not listen yet. Any other failure (a
// timeout, a reset) is returned at once: the request may have reached it.
Result<client::HttpResult> request_waiting(const AdminOptions& o, const std::string& method,
                                           const std::string& target, const std::string& body,
                                           const client::Headers& headers) {
  client::ClientOptions copts;
  copts.read_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  copts.total_timeout = copts.read_timeout;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.wait_s * 1000));
  bool told = false;
  for (;;) {
    LG_ASSIGN_OR_RETURN(auto http, client::HttpClient::create(o.url, copts));
    Result<client::HttpResult> res = http.request(method, target, body, headers);
    if (res.is_ok() || res.status().code() != StatusCode::kUnavailable ||
        std::chrono::steady_clock::now() >= deadline) {
      if (!res.is_ok() && res.status().code() == StatusCode::kUnavailable) {
        return Status::unavailable(res.status().message() + " (is `loragate serve` running there? --url, --wait)");
      }
      return res;
    }
    if (!told) {
      std::cerr << "loragate: waiting for the server at " << o.url << " (connection refused; up to " << o.wait_s
                << " s, --wait)\n";
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

Result<json> admin_call(const AdminOptions& o, const std::string& method, const std::string& target,
                        const json& body) {
  client::Headers headers;
  if (!o.token.empty()) headers.emplace_back("Authorization", "Bearer " + o.token);
  LG_ASSIGN_OR_RETURN(auto res,
                      request_waiting(o, method, target, body.is_null() ? std::string() : body.dump(), headers));
  Status s = client::status_from_http(res);
  if (!s.is_ok()) {
    // 403: the server has no admin token, so nothing the client sends can pass;
    // the fix is on the server's side. 401: the client sent none or a wrong one.
    if (res.status == 403) {
      return Status::invalid_argument(s.message() +
                                      " (the server was started without an admin token: start it with "
                                      "LORAGATE_ADMIN_TOKEN set, or auth.admin_token in its config)");
    }
    if (res.status == 401) {
      return Status::invalid_argument(s.message() + (o.token.empty() ? " (pass --token or set LORAGATE_ADMIN_TOKEN)"
                                                                      : " (--token does not match the server's)"));
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

std::string human_time(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t when = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&when, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S UTC", &utc);
  const int64_t ago = static_cast<int64_t>(std::time(nullptr)) - unix_seconds;
  std::string age;
  if (ago < 0) {
    age = "in the future";
  } else if (ago < 120) {
    age = std::to_string(ago) + " s ago";
  } else if (ago < 7200) {
    age = std::to_string(ago / 60) + " min ago";
  } else if (ago < 172800) {
    age = std::to_string(ago / 3600) + " h ago";
  } else {
    age = std::to_string(ago / 86400) + " days ago";
  }
  return std::string(stamp) + " (" + age + ")";
}

std::string human_time(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_integer()) return "-";
  return human_time(obj[key].get<int64_t>());
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

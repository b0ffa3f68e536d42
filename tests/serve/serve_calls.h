// Small helpers for the tests that drive `loragate serve` as a process: one
// HTTP call, a raw TCP connection for hostile clients, a metric read off
// /metrics and the server's resident memory.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "client/http_client.h"

namespace loragate::testing {

inline constexpr const char* kServeToken = "test-token-123";

// One exchange on a fresh client; status 0 when the exchange itself failed.
inline client::HttpResult serve_call(const std::string& url, const std::string& method, const std::string& target,
                                     const nlohmann::json& body = nullptr, bool auth = true) {
  auto c = client::HttpClient::create(url);
  if (!c.is_ok()) return {};
  client::Headers headers;
  if (auth) headers.emplace_back("Authorization", std::string("Bearer ") + kServeToken);
  auto r = c->request(method, target, body.is_null() ? "" : body.dump(), headers);
  return r.is_ok() ? *r : client::HttpResult{};
}

// The port of "http://127.0.0.1:PORT".
inline uint16_t url_port(const std::string& url) {
  return static_cast<uint16_t>(std::atoi(url.substr(url.rfind(':') + 1).c_str()));
}

// A connected TCP socket to 127.0.0.1:port, or -1.
inline int raw_connect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The value of the first sample of `name` (with `labels`, e.g. "{base=\"x\"}",
// or "" for the first sample of any labels) in a Prometheus text page; -1 if absent.
inline double metric_value(const std::string& page, const std::string& name, const std::string& labels = "") {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.rfind(name, 0) != 0) continue;
    const std::string rest = line.substr(name.size());
    if (rest.empty() || (rest[0] != ' ' && rest[0] != '{')) continue;  // a longer name
    if (!labels.empty() && rest.rfind(labels, 0) != 0) continue;
    return std::atof(rest.substr(rest.rfind(' ') + 1).c_str());
  }
  return -1;
}

// False in AddressSanitizer builds: ASan's quarantine keeps freed memory and
// its shadow grows with use, so RSS neither drops on free nor stays flat.
inline constexpr bool kRssIsMeaningful =
#if defined(__SANITIZE_ADDRESS__)
    false;
#else
    true;
#endif

// Resident memory of a process, in KiB (0 when it cannot be read).
inline long rss_kib(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

}  // namespace loragate::testing

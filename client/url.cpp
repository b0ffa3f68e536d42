// Base URLs of the client: parsing http://host[:port][/prefix] (TLS refused
// with a clear message), the Host header, and escaping a path segment.
#include "client/http_client.h"

#include "client/http_text.h"

namespace loragate::client {

using text::lower;
using text::trim;

std::string Url::host_header() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string Url::to_string() const { return "http://" + host_header() + prefix; }

Result<Url> parse_url(std::string_view text) {
  const std::string_view original = trim(text);
  std::string_view rest = original;
  const std::string shown = "'" + std::string(original) + "'";
  if (rest.empty()) return Status::invalid_argument("empty URL: expected http://host:port");
  if (const size_t sep = rest.find("://"); sep != std::string_view::npos) {
    const std::string scheme = lower(rest.substr(0, sep));
    if (scheme == "https") {
      return Status::unsupported("https is not supported in " + shown +
                                 ": loragate's client speaks plain HTTP; use http:// (or a TLS-terminating proxy)");
    }
    if (scheme != "http") {
      return Status::invalid_argument("unsupported URL scheme '" + scheme + "' in " + shown +
                                      ": expected http://host:port");
    }
    rest.remove_prefix(sep + 3);
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Status::invalid_argument("a base URL takes no query or fragment: " + shown);
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return Status::invalid_argument("user info in URLs is not supported: " + shown);
  }

  Url url;
  std::string_view port_text;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Status::invalid_argument("unclosed '[' in URL " + shown);
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Status::invalid_argument("unexpected text after ']' in URL " + shown);
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = authority.find(':');
    if (colon != std::string_view::npos && authority.find(':', colon + 1) != std::string_view::npos) {
      return Status::invalid_argument("IPv6 addresses in URLs need brackets (http://[::1]:8000): " + shown);
    }
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      has_port = true;
    }
  }
  if (url.host.empty()) return Status::invalid_argument("no host in URL " + shown);
  if (has_port) {
    if (port_text.empty() || port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Status::invalid_argument("bad port '" + std::string(port_text) + "' in URL " + shown);
    }
    const int port = std::stoi(std::string(port_text));
    if (port < 1 || port > 65535) {
      return Status::invalid_argument("port " + std::to_string(port) + " out of range 1..65535 in URL " + shown);
    }
    url.port = static_cast<uint16_t>(port);
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  url.prefix = std::string(path);
  return url;
}

std::string url_encode_segment(std::string_view segment) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (char ch : segment) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace loragate::client

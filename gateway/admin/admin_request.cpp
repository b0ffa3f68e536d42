#include "gateway/admin/admin_request.h"

#include <algorithm>
#include <cctype>

#include "gateway/http/router.h"

namespace loragate {
namespace {

using nlohmann::json;

// "%41" -> "A"; a '%' not followed by two hex digits stays as it is.
std::string percent_decoded(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() && std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(raw.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += raw[i];
    }
  }
  return out;
}

}  // namespace

std::optional<ApiError> parse_object(const HttpRequest& request, json* out, bool empty_ok) {
  if (empty_ok && request.body().empty()) {
    *out = json::object();
    return std::nullopt;
  }
  *out = json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return bad_request("the body is not valid JSON");
  if (!out->is_object()) return bad_request("the body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> string_field(const json& body, const char* key, std::string* out) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string() || it->get<std::string>().empty()) {
    return bad_request(std::string(key) + " must be a non-empty string", key);
  }
  *out = it->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> optional_string(const json& body, const char* key, std::string* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return bad_request(std::string(key) + " must be a string", key);
  *out = it->get<std::string>();
  return std::nullopt;
}

std::string tail_after(const HttpRequest& request, std::string_view prefix) {
  return percent_decoded(Router::path_of(request.target()).substr(prefix.size()));
}

std::string query_param(const HttpRequest& request, std::string_view key) {
  const std::string_view target = request.target();
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return "";
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != key) continue;
    std::string value(pair.substr(eq + 1));
    std::replace(value.begin(), value.end(), '+', ' ');
    return percent_decoded(value);
  }
  return "";
}

std::string named_base(const HttpRequest& request, const json& body) {
  if (auto it = body.find("base"); it != body.end() && it->is_string()) return it->get<std::string>();
  std::string q = query_param(request, "base");
  if (!q.empty()) return q;
  auto header = request.find("X-Base");
  return header == request.end() ? "" : std::string(header->value());
}

std::string actor_of(const HttpRequest& request, const json& body) {
  if (auto it = body.find("by"); it != body.end() && it->is_string() && !it->get<std::string>().empty()) {
    return it->get<std::string>().substr(0, 256);
  }
  auto header = request.find("X-Actor");
  if (header != request.end() && !header->value().empty()) return std::string(header->value().substr(0, 256));
  return "admin";
}

HttpResponse status_response(const Status& s) { return error_response(http_status_for(s), s.message()); }

}  // namespace loragate

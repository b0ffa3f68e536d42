#include "gateway/http/request_framing.h"

#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/core/string.hpp>

namespace loragate {
namespace {

constexpr const char* kCode = "invalid_transfer_encoding";

// The codings of every Transfer-Encoding line, in order, as one list
// (RFC 9110 §5.3); empty list elements are skipped as §5.6.1 asks.
std::vector<std::string> transfer_codings(const HttpRequest& header) {
  std::vector<std::string> codings;
  auto [first, last] = header.equal_range(http::field::transfer_encoding);
  for (auto it = first; it != last; ++it) {
    std::string_view rest = it->value();
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (!item.empty()) codings.emplace_back(item);
    }
  }
  return codings;
}

}  // namespace

std::optional<ApiError> check_request_framing(const HttpRequest& header) {
  if (header.find(http::field::transfer_encoding) == header.end()) return std::nullopt;
  if (header.version() < 11) {
    // RFC 9112 §6.1: in HTTP/1.0 the framing is faulty, Content-Length or not.
    return ApiError{http::status::bad_request, "Transfer-Encoding is not allowed in an HTTP/1.0 request", "", kCode};
  }
  if (header.find(http::field::content_length) != header.end()) {
    return ApiError{http::status::bad_request,
                    "a request must not carry both Transfer-Encoding and Content-Length (RFC 9112 §6.3)", "", kCode};
  }
  const std::vector<std::string> codings = transfer_codings(header);
  std::string listed;
  for (const std::string& c : codings) listed += (listed.empty() ? "" : ", ") + c;
  auto is_chunked = [](const std::string& c) { return boost::beast::iequals(c, "chunked"); };
  if (codings.empty() || !is_chunked(codings.back())) {
    return ApiError{http::status::bad_request,
                    "Transfer-Encoding must end with chunked, got '" + listed +
                        "': the body length is unknown (RFC 9112 §6.1)",
                    "", kCode};
  }
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (is_chunked(codings[i])) {
      return ApiError{http::status::bad_request,
                      "Transfer-Encoding '" + listed + "' applies chunked more than once (RFC 9112 §7)", "", kCode};
    }
  }
  if (codings.size() > 1) {
    return ApiError{http::status::not_implemented,
                    "transfer coding '" + codings.front() +
                        "' is not supported: send the body with Transfer-Encoding: chunked alone",
                    "", "unsupported_transfer_encoding"};
  }
  return std::nullopt;
}

}  // namespace loragate

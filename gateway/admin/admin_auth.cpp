#include "gateway/admin/admin_auth.h"

#include <algorithm>
#include <string_view>

namespace loragate {
namespace {

// Compares without an early exit, so timing does not reveal the common prefix.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

std::optional<ApiError> check_admin_token(const HttpRequest& request, const std::string& token) {
  if (token.empty()) {
    return ApiError{http::status::forbidden, "admin routes are disabled: no admin token is configured", "", ""};
  }
  const auto it = request.find(http::field::authorization);
  constexpr std::string_view kBearer = "Bearer ";
  if (it == request.end() || it->value().substr(0, kBearer.size()) != kBearer) {
    return ApiError{http::status::unauthorized, "admin routes need Authorization: Bearer <token>", "", ""};
  }
  if (!constant_time_equal(it->value().substr(kBearer.size()), token)) {
    return ApiError{http::status::unauthorized, "the admin token is wrong", "", ""};
  }
  return std::nullopt;
}

}  // namespace loragate

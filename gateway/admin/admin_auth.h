// The admin bearer token check: admin routes, and the X-Base header that lets
// an operator address a base generation that is not serving.
#pragma once

#include <optional>
#include <string>

#include "gateway/http/http_exchange.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

// Checks "Authorization: Bearer <token>" in constant time. Returns the error
// to answer (403 when no token is configured, 401 when it is missing or
// wrong), or nullopt when the caller may proceed.
std::optional<ApiError> check_admin_token(const HttpRequest& request, const std::string& token);

}  // namespace loragate

// OpenAI-shaped JSON responses and errors, and the Status -> HTTP mapping.
//
//   {"error": {"message": "...", "type": "invalid_request_error",
//              "param": "max_tokens" | null, "code": "..." | null}}
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "gateway/http/http_exchange.h"

namespace loragate {

// A response with a JSON body (application/json).
HttpResponse json_response(http::status status, const nlohmann::json& body);

// An OpenAI error response; empty `param`/`code` become null. The type
// follows the status: invalid_request_error (4xx), rate_limit_error (429),
// insufficient_memory (507), server_error (other 5xx). 429 and 503 carry
// Retry-After: 1 (transient); 507 does not.
HttpResponse error_response(http::status status, const std::string& message, const std::string& param = "",
                            const std::string& code = "");
// The error object alone, e.g. for an SSE error event.
nlohmann::json error_body(http::status status, const std::string& message, const std::string& param = "",
                          const std::string& code = "");

// The one StatusCode -> HTTP table: invalid_argument/unsupported -> 400,
// not_found -> 404, already_exists/failed_precondition -> 409,
// resource_exhausted -> 429 (or 413 when `about_size`), unavailable/cancelled
// -> 503, insufficient_memory -> 507, corrupt/io_error/internal -> 500.
http::status http_status_for(StatusCode code, bool about_size = false);
inline http::status http_status_for(const Status& status, bool about_size = false) {
  return http_status_for(status.code(), about_size);
}

// An error that stops a request before it reaches the engine: status, message
// and the offending parameter. Returned by the request parsers.
struct ApiError {
  http::status status = http::status::bad_request;
  std::string message;
  std::string param;  // the request field at fault; "" = none
  std::string code;   // optional machine-readable code ("model_not_found")

  HttpResponse to_response() const { return error_response(status, message, param, code); }
};

// A 400 naming `param`.
inline ApiError bad_request(std::string message, std::string param = "") {
  return ApiError{http::status::bad_request, std::move(message), std::move(param), ""};
}

}  // namespace loragate

// What admin routes read from a request: its JSON body and fields, the path
// tail and query string (percent-decoded, as the CLI encodes them), the base
// and actor a call names; and the error response of a Status.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "gateway/http/http_exchange.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

// Parses a JSON object body (an empty body reads as {} when `empty_ok`), or says what is wrong with it.
std::optional<ApiError> parse_object(const HttpRequest& request, nlohmann::json* out, bool empty_ok = false);
// A required non-empty string field.
std::optional<ApiError> string_field(const nlohmann::json& body, const char* key, std::string* out);
// An optional string field: absent or null leaves *out alone.
std::optional<ApiError> optional_string(const nlohmann::json& body, const char* key, std::string* out);

// The path after `prefix`, percent-decoded ("/admin/adapters/a%2Db" -> "a-b"), as the CLI encodes it.
std::string tail_after(const HttpRequest& request, std::string_view prefix);
// The value of `key` in the query string, percent-decoded; "" when absent.
std::string query_param(const HttpRequest& request, std::string_view key);
// The base an admin call names: the body's `base`, else ?base=, else the X-Base header ("" = serving).
std::string named_base(const HttpRequest& request, const nlohmann::json& body);
// Who asked: the body's `by`, else the X-Actor header, else "admin".
std::string actor_of(const HttpRequest& request, const nlohmann::json& body);

// The error response for a failed Status (its HTTP status and message).
HttpResponse status_response(const Status& s);

}  // namespace loragate

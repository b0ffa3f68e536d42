#include "gateway/openai/openai_errors.h"

namespace loragate {
namespace {

const char* error_type_for(http::status status) {
  const unsigned code = static_cast<unsigned>(status);
  if (code == 429) return "rate_limit_error";
  if (code == 507) return "insufficient_memory";  // a memory budget: retrying does not help until memory is freed
  if (code == 401) return "authentication_error";
  if (code >= 500) return "server_error";
  return "invalid_request_error";
}

nlohmann::json null_if_empty(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

}  // namespace

HttpResponse json_response(http::status status, const nlohmann::json& body) {
  HttpResponse res{status, 11};
  res.set(http::field::content_type, "application/json");
  // Replace invalid UTF-8 (e.g. echoed from a malformed request) instead of throwing.
  res.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return res;
}

nlohmann::json error_body(http::status status, const std::string& message, const std::string& param,
                          const std::string& code) {
  return {{"error",
           {{"message", message}, {"type", error_type_for(status)}, {"param", null_if_empty(param)},
            {"code", null_if_empty(code)}}}};
}

HttpResponse error_response(http::status status, const std::string& message, const std::string& param,
                            const std::string& code) {
  HttpResponse res = json_response(status, error_body(status, message, param, code));
  // Overload and temporary unavailability clear quickly (a queue slot frees
  // per finished request): tell well-behaved clients to retry after a second.
  if (status == http::status::too_many_requests || status == http::status::service_unavailable) {
    res.set(http::field::retry_after, "1");
  }
  return res;
}

http::status http_status_for(StatusCode code, bool about_size) {
  // Every code listed, no default: a new code does not compile until it has a row here.
  switch (code) {
    case StatusCode::kOk: return http::status::ok;
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported: return http::status::bad_request;
    case StatusCode::kNotFound: return http::status::not_found;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition: return http::status::conflict;
    case StatusCode::kResourceExhausted:
      return about_size ? http::status::payload_too_large : http::status::too_many_requests;
    // A cancelled request is only ever answered when the server cancelled it (stopping).
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled: return http::status::service_unavailable;
    // Not transient like 429: no Retry-After, the operator must free memory first.
    case StatusCode::kInsufficientMemory: return http::status::insufficient_storage;
    case StatusCode::kCorrupt:
    case StatusCode::kIoError:
    case StatusCode::kInternal: return http::status::internal_server_error;
  }
  return http::status::internal_server_error;
}

}  // namespace loragate

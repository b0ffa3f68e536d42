// The framing rules of RFC 9112 §6 that Beast's parser leaves to the server.
// It decodes a request body as chunked when "chunked" is the last transfer
// coding and by Content-Length otherwise; it does not refuse what a server
// must refuse: a final coding other than chunked (the body length is then
// unknown: "xchunked" + Content-Length was read by Content-Length), codings
// it cannot decode ("gzip, chunked" came through still compressed), or
// Transfer-Encoding beside Content-Length (the request-smuggling shape).
// The session checks every request header here before it reads the body,
// and answers a refusal and closes the connection.
#pragma once

#include <optional>

#include "gateway/http/http_exchange.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

// nullopt when the header frames its body in a way we read; else the error:
// 400 for Transfer-Encoding with Content-Length, in HTTP/1.0, or without
// chunked last; 501 for a coding before chunked (only plain chunked is decoded).
std::optional<ApiError> check_request_framing(const HttpRequest& header);

}  // namespace loragate

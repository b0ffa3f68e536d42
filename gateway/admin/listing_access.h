// Who may read what the server lists: the adapter names in GET /v1/models
// and everything GET /metrics exposes (adapter names among them). With
// server.public_listings (the default, as in vLLM and LoRAX) anyone may;
// without it, only a caller with the admin bearer token.
#pragma once

#include <optional>
#include <string>

#include "gateway/http/http_exchange.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

struct ListingAccess {
  bool public_listings = true;  // server.public_listings
  std::string admin_token;      // the admin bearer token; "" = none configured (no one gets in)
};

// nullopt when `request` may read the listings; else the error to answer:
// 401 without the right token, 403 when no admin token is configured.
std::optional<ApiError> check_listing_access(const ListingAccess& access, const HttpRequest& request);

}  // namespace loragate

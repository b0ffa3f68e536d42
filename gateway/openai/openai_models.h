// GET /v1/models: the base model (under its served name) and every
// registered adapter, each with "parent" = the base. With
// server.public_listings false, a caller without the admin token sees the
// base alone (adapter names can name tenants).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "gateway/openai/openai_request.h"

namespace loragate {

nlohmann::json models_list(const ApiContext& ctx, bool with_adapters = true);
void handle_models(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange);

}  // namespace loragate

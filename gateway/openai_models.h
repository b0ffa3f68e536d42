// GET /v1/models: the base model (under its served name) and every
// registered adapter, each with "parent" = the base.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "gateway/openai_request.h"

namespace loragate {

nlohmann::json models_list(const ApiContext& ctx);
void handle_models(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange);

}  // namespace loragate

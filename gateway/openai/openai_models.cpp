#include "gateway/openai/openai_models.h"

#include "adapters/adapter_catalog.h"
#include "gateway/admin/listing_access.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

using nlohmann::json;

json models_list(const ApiContext& ctx, bool with_adapters) {
  json data = json::array();
  const std::shared_ptr<ServingBase> base = ctx.bases->serving();
  if (base == nullptr) return {{"object", "list"}, {"data", std::move(data)}};
  const int64_t max_len = base->max_model_len();
  data.push_back({{"id", ctx.served_model_name},
                  {"object", "model"},
                  {"created", ctx.started_unix},
                  {"owned_by", "loragate"},
                  {"root", base->name()},
                  {"parent", nullptr},
                  {"max_model_len", max_len}});
  if (!with_adapters) return {{"object", "list"}, {"data", std::move(data)}};
  for (const AdapterInfo& info : base->adapters()->list()) {
    data.push_back({{"id", info.name},
                    {"object", "model"},
                    {"created", ctx.started_unix},
                    {"owned_by", "loragate"},
                    {"root", info.name},
                    {"parent", ctx.served_model_name},
                    {"max_model_len", max_len}});
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

void handle_models(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange) {
  const bool with_adapters = !check_listing_access({ctx.public_listings, ctx.admin_token}, exchange->request());
  exchange->respond(json_response(http::status::ok, models_list(ctx, with_adapters)));
}

}  // namespace loragate

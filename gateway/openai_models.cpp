#include "gateway/openai_models.h"

#include "adapters/adapter_cache.h"
#include "gateway/openai_errors.h"

namespace loragate {

using nlohmann::json;

json models_list(const ApiContext& ctx) {
  const Engine& engine = ctx.loop->engine();
  json data = json::array();
  data.push_back({{"id", ctx.served_model_name},
                  {"object", "model"},
                  {"created", ctx.started_unix},
                  {"owned_by", "loragate"},
                  {"root", ctx.served_model_name},
                  {"parent", nullptr},
                  {"max_model_len", engine.max_model_len()}});
  if (const AdapterCache* adapters = engine.adapters()) {
    for (const AdapterInfo& info : adapters->list()) {
      data.push_back({{"id", info.name},
                      {"object", "model"},
                      {"created", ctx.started_unix},
                      {"owned_by", "loragate"},
                      {"root", info.name},
                      {"parent", ctx.served_model_name},
                      {"max_model_len", engine.max_model_len()}});
    }
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

void handle_models(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange) {
  exchange->respond(json_response(http::status::ok, models_list(ctx)));
}

}  // namespace loragate

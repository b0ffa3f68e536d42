#include "gateway/openai_request.h"

namespace loragate {

std::optional<ApiError> read_openai_request(const ApiContext& ctx, Exchange& exchange, bool chat, OpenAiRequest* out) {
  if (auto err = parse_json_object(exchange.request().body(), &out->body)) return err;
  if (auto err = read_common_fields(out->body, chat, &out->fields)) return err;
  std::string scenario = out->fields.scenario;
  auto header = exchange.request().find("X-Scenario");
  if (header != exchange.request().end() && !header->value().empty()) scenario = std::string(header->value());
  RequestRecord& record = exchange.record();
  record.model = out->fields.model;
  record.scenario = scenario;
  if (auto err = resolve_model(out->fields.model, scenario, ctx.served_model_name, ctx.resolver,
                               ctx.loop->engine().adapters(), &out->choice)) {
    return err;
  }
  record.adapter = out->choice.adapter;
  out->response_model = out->fields.model.empty() ? ctx.served_model_name : out->fields.model;
  return std::nullopt;
}

}  // namespace loragate

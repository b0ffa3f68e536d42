#include "gateway/openai/openai_request.h"

#include "gateway/admin/admin_auth.h"
#include "gateway/openai/structured_output.h"

namespace loragate {

std::optional<ApiError> capture_base(const ApiContext& ctx, const HttpRequest& request,
                                     std::shared_ptr<ServingBase>* out) {
  auto header = request.find("X-Base");
  if (header == request.end() || header->value().empty()) {
    *out = ctx.bases->serving();
    if (*out == nullptr) {
      return ApiError{http::status::service_unavailable, "no base model is serving yet", "", "service_unavailable"};
    }
    return std::nullopt;
  }
  if (auto denied = check_admin_token(request, ctx.admin_token)) {
    denied->message = "X-Base: " + denied->message;
    return denied;
  }
  Result<std::shared_ptr<ServingBase>> found = ctx.bases->find(std::string(header->value()));
  if (!found.is_ok()) return ApiError{http_status_for(found.status()), found.status().message(), "X-Base", ""};
  *out = std::move(found).value();
  return std::nullopt;
}

namespace {

struct ParsedBody {
  nlohmann::json body;
  std::optional<ApiError> error;
};

}  // namespace

void parse_body_then(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange,
                     std::function<void(nlohmann::json)> next) {
  // The request stays untouched while its exchange is handled, and the job
  // holds the exchange: its body may be read from the pool.
  const std::string_view text = exchange->request().body();
  run_off_strand_if_large(
      *ctx.blocking, exchange, text.size(),
      [text] {
        ParsedBody parsed;
        parsed.error = parse_json_object(text, &parsed.body);
        return parsed;
      },
      [exchange, next = std::move(next)](ParsedBody parsed) {
        if (parsed.error) return exchange->respond(parsed.error->to_response());
        next(std::move(parsed.body));
      });
}

std::optional<ApiError> read_openai_request(const ApiContext& ctx, Exchange& exchange, nlohmann::json body, bool chat,
                                            OpenAiRequest* out) {
  out->body = std::move(body);
  if (auto err = read_common_fields(out->body, chat, &out->fields)) return err;
  if (auto err = read_structured_output(out->body, exchange.request().body(), &out->fields.params.grammar)) return err;
  return resolve_request_target(ctx, exchange, out->fields.model, out->fields.scenario, &out->base, &out->choice,
                                &out->response_model);
}

std::optional<ApiError> resolve_request_target(const ApiContext& ctx, Exchange& exchange, const std::string& model,
                                               const std::string& scenario_field, std::shared_ptr<ServingBase>* base,
                                               ModelChoice* choice, std::string* response_model) {
  std::string scenario = scenario_field;
  auto header = exchange.request().find("X-Scenario");
  if (header != exchange.request().end() && !header->value().empty()) scenario = std::string(header->value());
  RequestRecord& record = exchange.record();
  record.model = model;
  record.scenario = scenario;
  if (auto err = capture_base(ctx, exchange.request(), base)) return err;
  record.base = (*base)->name();
  if (auto err = resolve_model(model, scenario, ctx.served_model_name, (*base)->name(), ctx.resolver,
                               (*base)->adapters(), choice)) {
    return err;
  }
  record.adapter = choice->adapter;
  // No model named: the base that serves it, by the name the client addressed it with.
  auto addressed = exchange.request().find("X-Base");
  const bool by_header = addressed != exchange.request().end() && !addressed->value().empty();
  *response_model = !model.empty() ? model : by_header ? (*base)->name() : ctx.served_model_name;
  return std::nullopt;
}

}  // namespace loragate

// ApiContext and the first steps every OpenAI generation route takes: parse
// the JSON body, read the shared fields, capture the base generation the
// request runs on (the serving one, or the one an admin names with X-Base),
// pick the adapter from `model` and the scenario (X-Scenario header, else the
// `scenario` field) on that base, and note them in the request record.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bases/base_set.h"
#include "gateway/admin/blocking_work.h"
#include "gateway/http/http_exchange.h"
#include "gateway/model_resolver.h"
#include "gateway/openai/generation_runner.h"
#include "gateway/openai/prompt_size_limit.h"
#include "gateway/openai/request_fields.h"

namespace loragate {

// What the OpenAI routes share; owned by the Gateway, outlives every exchange.
struct ApiContext {
  BaseSet* bases = nullptr;
  std::string served_model_name;            // names the serving base, whichever generation it is
  ModelResolver* resolver = nullptr;        // may be null: scenarios then 404
  GenerationRunner* runner = nullptr;
  BlockingWork* blocking = nullptr;         // parses, renders and tokenises large prompts off the network strands
  PromptSizeLimit* prompt_limit = nullptr;  // refuses text that cannot fit before it is tokenised
  std::string admin_token;                  // X-Base needs it; "" = X-Base refused
  bool public_listings = true;              // server.public_listings: false = /v1/models lists adapters only
                                            // to the admin token's holder
  std::string tool_call_parser = "auto";    // server.tool_call_parser (gateway/openai/tool_choice.h)
  int64_t started_unix = 0;                 // "created" of the models in /v1/models
};

// A parsed generation request before its prompt is built.
struct OpenAiRequest {
  nlohmann::json body;
  CommonFields fields;
  std::shared_ptr<ServingBase> base;  // captured here; the request finishes on it
  ModelChoice choice;
  std::string response_model;  // `model` echoed in responses (the served name when absent)
};

// Parses the request body as a JSON object, then runs `next(body)` on the
// exchange's strand; a parse error is answered (400). A large body is parsed
// on ctx.blocking: a megabyte of JSON would hold a network thread for
// milliseconds.
void parse_body_then(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange,
                     std::function<void(nlohmann::json)> next);

// Reads the parsed `body` into *out.
std::optional<ApiError> read_openai_request(const ApiContext& ctx, Exchange& exchange, nlohmann::json body, bool chat,
                                            OpenAiRequest* out);

// What `model` and the scenario (the X-Scenario header, else `scenario_field`)
// name: the base captured (capture_base) and the adapter on it, noted in the
// request record, and the `model` a response echoes. read_openai_request's
// second half, for routes that read no other shared field (/tokenize).
std::optional<ApiError> resolve_request_target(const ApiContext& ctx, Exchange& exchange, const std::string& model,
                                               const std::string& scenario_field, std::shared_ptr<ServingBase>* base,
                                               ModelChoice* choice, std::string* response_model);

// The serving base, or the base an admin names with X-Base; 503 before any
// base serves, 401/403 for X-Base without the admin token, 404/409 for a base
// that is not loaded or not ready.
std::optional<ApiError> capture_base(const ApiContext& ctx, const HttpRequest& request,
                                     std::shared_ptr<ServingBase>* out);

}  // namespace loragate

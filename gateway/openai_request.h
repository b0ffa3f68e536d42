// ApiContext and the first steps every OpenAI generation route takes: parse
// the JSON body, read the shared fields, pick the adapter from `model` and
// the scenario (X-Scenario header, else the `scenario` field), and note them
// in the request record.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "engine/engine_loop.h"
#include "gateway/generation_runner.h"
#include "gateway/http_exchange.h"
#include "gateway/model_resolver.h"
#include "gateway/request_fields.h"

namespace loragate {

// What the OpenAI routes share; owned by the Gateway, outlives every exchange.
struct ApiContext {
  EngineLoop* loop = nullptr;
  std::string served_model_name;
  ModelResolver* resolver = nullptr;        // may be null: scenarios then 404
  GenerationRunner* runner = nullptr;
  const ChatTemplate* chat_template = nullptr;
  int64_t started_unix = 0;                 // "created" of the models in /v1/models
};

// A parsed generation request before its prompt is built.
struct OpenAiRequest {
  nlohmann::json body;
  CommonFields fields;
  ModelChoice choice;
  std::string response_model;  // `model` echoed in responses (the served name when absent)
};

std::optional<ApiError> read_openai_request(const ApiContext& ctx, Exchange& exchange, bool chat, OpenAiRequest* out);

}  // namespace loragate

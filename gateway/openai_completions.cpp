#include "gateway/openai_completions.h"

#include <algorithm>

#include "gateway/logprobs_format.h"

namespace loragate {

using nlohmann::json;

json CompletionFormat::chunk(json choices) const {
  return {{"id", meta_.id},           {"object", "text_completion"},
          {"created", meta_.created}, {"model", meta_.model},
          {"system_fingerprint", meta_.system_fingerprint}, {"choices", std::move(choices)}};
}

json CompletionFormat::full(const GenerationResult& result) const {
  json logprobs = nullptr;
  const bool echo_logprobs = extras_.echo && !result.prompt_logprobs.empty();
  if (tokenizer_ != nullptr && (!result.logprobs.empty() || echo_logprobs)) {
    logprobs = completion_logprobs(*tokenizer_, result, echo_logprobs);
  }
  json choice = {{"index", 0},
                 {"text", extras_.echo ? extras_.prompt_text + result.text : result.text},
                 {"finish_reason", openai_finish_reason(result.finish_reason)},
                 {"logprobs", std::move(logprobs)}};
  if (extras_.vllm_prompt_logprobs && tokenizer_ != nullptr) {
    choice["prompt_logprobs"] = vllm_prompt_logprobs(*tokenizer_, result);
  }
  json body = chunk(json::array({std::move(choice)}));
  body["usage"] = usage_json(result);
  return body;
}

json CompletionFormat::delta(std::string_view text) const {
  return chunk(json::array({{{"index", 0}, {"text", text}, {"finish_reason", nullptr}, {"logprobs", nullptr}}}));
}

json CompletionFormat::finish(std::string_view text, std::string_view finish_reason) const {
  return chunk(json::array({{{"index", 0}, {"text", text}, {"finish_reason", finish_reason}, {"logprobs", nullptr}}}));
}

json CompletionFormat::usage(const GenerationResult& result) const {
  json body = chunk(json::array());
  body["usage"] = usage_json(result);
  return body;
}

namespace {

bool all_of_type(const json& list, bool (json::*is)() const noexcept) {
  for (const json& v : list) {
    if (!(v.*is)()) return false;
  }
  return true;
}

std::optional<ApiError> token_ids(const json& list, std::vector<int32_t>* out) {
  for (const json& v : list) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      return bad_request("prompt token ids must be non-negative integers", "prompt");
    }
    out->push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> read_completion_prompt(const json& body, const Tokenizer* tokenizer,
                                               std::vector<int32_t>* prompt_ids) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad_request("prompt is required", "prompt");
  const json& prompt = *it;
  const char* shapes = "prompt must be a string, a list of one string, or a list of token ids";
  auto encode = [&](const std::string& text) -> std::optional<ApiError> {
    if (tokenizer == nullptr) return bad_request("this model has no tokenizer: send the prompt as token ids", "prompt");
    *prompt_ids = tokenizer->encode(text, /*add_special_tokens=*/true);
    return std::nullopt;
  };
  if (prompt.is_string()) return encode(prompt.get<std::string>());
  if (!prompt.is_array() || prompt.empty()) return bad_request(shapes, "prompt");
  if (all_of_type(prompt, &json::is_string)) {
    if (prompt.size() != 1) {
      return bad_request("only one prompt per request is supported, got " + std::to_string(prompt.size()), "prompt");
    }
    return encode(prompt[0].get<std::string>());
  }
  if (all_of_type(prompt, &json::is_number)) return token_ids(prompt, prompt_ids);
  if (prompt.size() == 1 && prompt[0].is_array()) return token_ids(prompt[0], prompt_ids);
  if (all_of_type(prompt, &json::is_array)) {
    return bad_request("only one prompt per request is supported, got " + std::to_string(prompt.size()), "prompt");
  }
  return bad_request(shapes, "prompt");
}

void handle_completions(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange) {
  OpenAiRequest req;
  if (auto err = read_openai_request(ctx, *exchange, /*chat=*/false, &req)) return exchange->respond(err->to_response());
  const json& body = req.body;
  int64_t logprobs = -1;
  if (auto err = read_int(body, "logprobs", 0, 20, "an integer from 0 to 20", &logprobs)) {
    return exchange->respond(err->to_response());
  }
  if (logprobs >= 0 && req.fields.stream) {
    return exchange->respond(bad_request("logprobs with stream is not supported yet", "logprobs").to_response());
  }
  bool echo = false;
  if (auto err = read_bool(body, "echo", &echo)) return exchange->respond(err->to_response());
  if (echo && req.fields.stream) {
    return exchange->respond(bad_request("echo with stream is not supported yet", "echo").to_response());
  }
  int64_t prompt_logprobs = -1;
  if (auto err = read_int(body, "prompt_logprobs", 0, 20, "an integer from 0 to 20", &prompt_logprobs)) {
    return exchange->respond(err->to_response());
  }
  if (prompt_logprobs >= 0 && req.fields.stream) {
    return exchange->respond(bad_request("prompt_logprobs with stream is not supported yet", "prompt_logprobs").to_response());
  }
  std::string suffix;
  if (auto err = read_string(body, "suffix", &suffix)) return exchange->respond(err->to_response());
  if (!suffix.empty()) return exchange->respond(bad_request("suffix is not supported yet", "suffix").to_response());

  const Tokenizer* tokenizer = req.base->tokenizer();
  GenerationCall call;
  call.base = req.base;
  if (auto err = read_completion_prompt(body, tokenizer, &call.request.prompt_ids)) {
    return exchange->respond(err->to_response());
  }
  call.request.params = req.fields.params;
  call.request.params.logprobs = static_cast<int32_t>(logprobs);
  if (call.request.params.max_tokens < 0) call.request.params.max_tokens = 16;  // OpenAI's default
  // Scoring the prompt: every token after the first (nothing predicts the first).
  const int64_t score_top = std::max(prompt_logprobs, echo ? logprobs : -1);
  if (score_top >= 0 && call.request.prompt_ids.size() >= 2) {
    call.request.prompt_logprobs = static_cast<int32_t>(score_top);
    call.request.score_from = 1;
  }
  CompletionExtras extras;
  extras.echo = echo;
  extras.vllm_prompt_logprobs = prompt_logprobs >= 0;
  if (echo) {
    const json& prompt = body["prompt"];
    if (prompt.is_string()) {
      extras.prompt_text = prompt.get<std::string>();
    } else if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
      extras.prompt_text = prompt[0].get<std::string>();
    } else if (tokenizer != nullptr) {
      extras.prompt_text = tokenizer->decode(call.request.prompt_ids, /*skip_special_tokens=*/true);
    }
  }
  call.request.adapter = req.choice.adapter;
  call.stream = req.fields.stream;
  call.include_usage = req.fields.include_usage;
  call.format = std::make_shared<CompletionFormat>(
      CompletionMeta{make_response_id("cmpl-", exchange->record().id), unix_now(), req.response_model,
                     req.base->fingerprint()},
      tokenizer, std::move(extras));
  ctx.runner->run(exchange, std::move(call));
}

}  // namespace loragate

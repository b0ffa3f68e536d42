#include "gateway/openai_completions.h"

#include <algorithm>

#include "gateway/blocking_work.h"
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

std::optional<ApiError> read_completion_prompt(const json& body, CompletionPrompt* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad_request("prompt is required", "prompt");
  const json& prompt = *it;
  const char* shapes = "prompt must be a string, a list of one string, or a list of token ids";
  if (prompt.is_string()) {
    out->text = prompt.get<std::string>();
    return std::nullopt;
  }
  if (!prompt.is_array() || prompt.empty()) return bad_request(shapes, "prompt");
  if (all_of_type(prompt, &json::is_string)) {
    if (prompt.size() != 1) {
      return bad_request("only one prompt per request is supported, got " + std::to_string(prompt.size()), "prompt");
    }
    out->text = prompt[0].get<std::string>();
    return std::nullopt;
  }
  if (all_of_type(prompt, &json::is_number)) return token_ids(prompt, &out->ids);
  if (prompt.size() == 1 && prompt[0].is_array()) return token_ids(prompt[0], &out->ids);
  if (all_of_type(prompt, &json::is_array)) {
    return bad_request("only one prompt per request is supported, got " + std::to_string(prompt.size()), "prompt");
  }
  return bad_request(shapes, "prompt");
}

namespace {

// What the body asks for besides the prompt, read before it is encoded.
struct CompletionOptions {
  int64_t logprobs = -1;
  int64_t prompt_logprobs = -1;
  bool echo = false;
};

std::optional<ApiError> read_completion_options(const json& body, bool stream, CompletionOptions* out) {
  if (auto err = read_int(body, "logprobs", 0, 20, "an integer from 0 to 20", &out->logprobs)) return err;
  if (out->logprobs >= 0 && stream) return bad_request("logprobs with stream is not supported yet", "logprobs");
  if (auto err = read_bool(body, "echo", &out->echo)) return err;
  if (out->echo && stream) return bad_request("echo with stream is not supported yet", "echo");
  if (auto err = read_int(body, "prompt_logprobs", 0, 20, "an integer from 0 to 20", &out->prompt_logprobs)) {
    return err;
  }
  if (out->prompt_logprobs >= 0 && stream) {
    return bad_request("prompt_logprobs with stream is not supported yet", "prompt_logprobs");
  }
  std::string suffix;
  if (auto err = read_string(body, "suffix", &suffix)) return err;
  if (!suffix.empty()) return bad_request("suffix is not supported yet", "suffix");
  return std::nullopt;
}

// On the exchange's strand, once the prompt is token ids; `prompt_text` is
// the text they were encoded from (null: sent as ids).
void submit_completion(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange, const OpenAiRequest& req,
                       const CompletionOptions& options, const std::string* prompt_text,
                       std::vector<int32_t> prompt_ids) {
  const Tokenizer* tokenizer = req.base->tokenizer();
  GenerationCall call;
  call.base = req.base;
  call.request.prompt_ids = std::move(prompt_ids);
  call.request.params = req.fields.params;
  call.request.params.logprobs = static_cast<int32_t>(options.logprobs);
  if (call.request.params.max_tokens < 0) call.request.params.max_tokens = 16;  // OpenAI's default
  // Scoring the prompt: every token after the first (nothing predicts the first).
  const int64_t score_top = std::max(options.prompt_logprobs, options.echo ? options.logprobs : -1);
  if (score_top >= 0 && call.request.prompt_ids.size() >= 2) {
    call.request.prompt_logprobs = static_cast<int32_t>(score_top);
    call.request.score_from = 1;
  }
  CompletionExtras extras;
  extras.echo = options.echo;
  extras.vllm_prompt_logprobs = options.prompt_logprobs >= 0;
  if (options.echo) {
    if (prompt_text != nullptr) {
      extras.prompt_text = *prompt_text;
    } else if (tokenizer != nullptr) {
      extras.prompt_text = tokenizer->decode(call.request.prompt_ids, /*skip_special_tokens=*/true);
    }
  }
  call.request.adapter = req.choice.adapter;
  call.request.cache_salt = req.fields.cache_salt;
  call.stream = req.fields.stream;
  call.include_usage = req.fields.include_usage;
  call.format = std::make_shared<CompletionFormat>(
      CompletionMeta{make_response_id("cmpl-", exchange->record().id), unix_now(), req.response_model,
                     req.base->fingerprint()},
      tokenizer, std::move(extras));
  ctx.runner->run(exchange, std::move(call));
}

// On the exchange's strand, once the body is parsed.
void completion_with_body(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange, json parsed) {
  auto req = std::make_shared<OpenAiRequest>();
  if (auto err = read_openai_request(ctx, *exchange, std::move(parsed), /*chat=*/false, req.get())) {
    return exchange->respond(err->to_response());
  }
  CompletionOptions options;
  if (auto err = read_completion_options(req->body, req->fields.stream, &options)) {
    return exchange->respond(err->to_response());
  }
  CompletionPrompt prompt;
  if (auto err = read_completion_prompt(req->body, &prompt)) return exchange->respond(err->to_response());
  if (!prompt.text) return submit_completion(ctx, exchange, *req, options, nullptr, std::move(prompt.ids));
  if (req->base->tokenizer() == nullptr) {
    return exchange->respond(
        bad_request("this model has no tokenizer: send the prompt as token ids", "prompt").to_response());
  }
  const int64_t text_bytes = static_cast<int64_t>(prompt.text->size());
  if (auto err = ctx.prompt_limit->check(req->base, text_bytes, "the prompt", "prompt")) {
    return exchange->respond(err->to_response());
  }
  // Tokenising takes time in proportion to the text: a long one not on a network thread.
  auto text = std::make_shared<const std::string>(std::move(*prompt.text));
  run_off_strand_if_large(
      *ctx.blocking, exchange, text->size(),
      [base = req->base, text] { return base->tokenizer()->encode(*text, /*add_special_tokens=*/true); },
      [ctx = &ctx, exchange, req, options, text](std::vector<int32_t> ids) {
        submit_completion(*ctx, exchange, *req, options, text.get(), std::move(ids));
      });
}

}  // namespace

void handle_completions(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange) {
  parse_body_then(ctx, exchange, [&ctx, exchange](json body) { completion_with_body(ctx, exchange, std::move(body)); });
}

}  // namespace loragate

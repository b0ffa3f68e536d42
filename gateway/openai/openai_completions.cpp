#include "gateway/openai/openai_completions.h"

#include <algorithm>

#include "gateway/admin/blocking_work.h"
#include "gateway/openai/logprobs_format.h"

namespace loragate {

using nlohmann::json;

json CompletionFormat::chunk(json choices) const {
  return {{"id", meta_.id},           {"object", "text_completion"},
          {"created", meta_.created}, {"model", meta_.model},
          {"system_fingerprint", meta_.system_fingerprint}, {"choices", std::move(choices)}};
}

json CompletionFormat::choice(int32_t index, const GenerationResult& result) const {
  json logprobs = nullptr;
  const bool echo_logprobs = extras_.echo && !result.prompt_logprobs.empty();
  if (tokenizer_ != nullptr && (!result.logprobs.empty() || echo_logprobs)) {
    logprobs = completion_logprobs(*tokenizer_, result, echo_logprobs);
  }
  std::string text = result.text;
  if (extras_.echo) {
    const size_t prompt = static_cast<size_t>(index / std::max(extras_.n, 1));
    if (prompt < extras_.prompt_texts.size()) text = extras_.prompt_texts[prompt] + text;
  }
  json out = {{"index", index},
              {"text", std::move(text)},
              {"finish_reason", openai_finish_reason(result.finish_reason)},
              {"logprobs", std::move(logprobs)}};
  if (extras_.vllm_prompt_logprobs && tokenizer_ != nullptr) {
    out["prompt_logprobs"] = vllm_prompt_logprobs(*tokenizer_, result);
  }
  return out;
}

json CompletionFormat::full(const std::vector<GenerationResult>& results) const {
  json choices = json::array();
  for (size_t i = 0; i < results.size(); ++i) choices.push_back(choice(static_cast<int32_t>(i), results[i]));
  json body = chunk(std::move(choices));
  body["usage"] = usage_json(count_usage(results, extras_.n));
  return body;
}

std::vector<json> CompletionFormat::delta(int32_t index, std::string_view text) {
  return {chunk(json::array({{{"index", index}, {"text", text}, {"finish_reason", nullptr}, {"logprobs", nullptr}}}))};
}

std::vector<json> CompletionFormat::finish(int32_t index, std::string_view text, std::string_view finish_reason) {
  return {chunk(
      json::array({{{"index", index}, {"text", text}, {"finish_reason", finish_reason}, {"logprobs", nullptr}}}))};
}

json CompletionFormat::usage(const std::vector<GenerationResult>& results) const {
  json body = chunk(json::array());
  body["usage"] = usage_json(count_usage(results, extras_.n));
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

std::optional<ApiError> read_completion_prompts(const json& body, std::vector<CompletionPrompt>* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad_request("prompt is required", "prompt");
  const json& prompt = *it;
  const char* shapes = "prompt must be a string, a list of strings, a list of token ids, or a list of lists of token ids";
  out->clear();
  if (prompt.is_string()) {
    out->push_back({prompt.get<std::string>(), {}});
    return std::nullopt;
  }
  if (!prompt.is_array() || prompt.empty()) return bad_request(shapes, "prompt");
  if (all_of_type(prompt, &json::is_number)) {  // one prompt as token ids
    out->emplace_back();
    return token_ids(prompt, &out->back().ids);
  }
  const bool strings = all_of_type(prompt, &json::is_string);
  if (!strings && !all_of_type(prompt, &json::is_array)) return bad_request(shapes, "prompt");
  if (prompt.size() > kMaxPrompts) {
    static_assert(kMaxPrompts == 64, "the message below names the bound");
    return bad_request("at most 64 prompts per request, got " + std::to_string(prompt.size()), "prompt");
  }
  for (const json& p : prompt) {
    out->emplace_back();
    if (strings) {
      out->back().text = p.get<std::string>();
    } else if (auto err = token_ids(p, &out->back().ids)) {
      return err;
    }
  }
  return std::nullopt;
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

// On the exchange's strand, once every prompt is token ids (a text prompt
// keeps its text, which echo shows): n sequences per prompt, choice p * n + j
// sampling with seed + j when a seed is set (vLLM's rule), so a prompt's
// choices match what single requests with those seeds would give.
void submit_completion(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange, const OpenAiRequest& req,
                       const CompletionOptions& options, std::vector<CompletionPrompt> prompts) {
  const Tokenizer* tokenizer = req.base->tokenizer();
  const int32_t n = req.fields.n;
  GenerationCall call;
  call.base = req.base;
  call.n = n;
  CompletionExtras extras;
  extras.n = n;
  extras.echo = options.echo;
  extras.vllm_prompt_logprobs = options.prompt_logprobs >= 0;
  for (CompletionPrompt& prompt : prompts) {
    if (options.echo) {
      if (prompt.text) {
        extras.prompt_texts.push_back(*prompt.text);
      } else {
        extras.prompt_texts.push_back(
            tokenizer != nullptr ? tokenizer->decode(prompt.ids, /*skip_special_tokens=*/true) : std::string());
      }
    }
    GenerationRequest request;
    request.prompt_ids = std::move(prompt.ids);
    request.params = req.fields.params;
    request.params.logprobs = static_cast<int32_t>(options.logprobs);
    if (request.params.max_tokens < 0) request.params.max_tokens = 16;  // OpenAI's default
    // Scoring the prompt: every token after the first (nothing predicts the first).
    const int64_t score_top = std::max(options.prompt_logprobs, options.echo ? options.logprobs : -1);
    if (score_top >= 0 && request.prompt_ids.size() >= 2) {
      request.prompt_logprobs = static_cast<int32_t>(score_top);
      request.score_from = 1;
    }
    request.adapter = req.choice.adapter;
    request.cache_salt = req.fields.cache_salt;
    for (int32_t j = 0; j < n; ++j) {
      call.requests.push_back(request);
      SamplingParams& params = call.requests.back().params;
      if (params.seed) params.seed = *params.seed + static_cast<uint64_t>(j);  // unsigned: wraps at 2^64
    }
  }
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
  std::vector<CompletionPrompt> prompts;
  if (auto err = read_completion_prompts(req->body, &prompts)) return exchange->respond(err->to_response());
  const int64_t sequences = static_cast<int64_t>(prompts.size()) * req->fields.n;
  if (sequences > kMaxSequences) {
    static_assert(kMaxSequences == 128, "the message below names the bound");
    return exchange->respond(bad_request("prompts times n must be at most 128, got " +
                                             std::to_string(prompts.size()) + " x " + std::to_string(req->fields.n),
                                         "n")
                                 .to_response());
  }
  size_t text_bytes = 0;
  for (const CompletionPrompt& prompt : prompts) {
    if (!prompt.text) continue;
    if (req->base->tokenizer() == nullptr) {
      return exchange->respond(
          bad_request("this model has no tokenizer: send the prompt as token ids", "prompt").to_response());
    }
    if (auto err = ctx.prompt_limit->check(req->base, static_cast<int64_t>(prompt.text->size()), "the prompt",
                                           "prompt")) {
      return exchange->respond(err->to_response());
    }
    text_bytes += prompt.text->size();
  }
  // Tokenising takes time in proportion to the text: a long one not on a network thread.
  auto shared = std::make_shared<std::vector<CompletionPrompt>>(std::move(prompts));
  run_off_strand_if_large(
      *ctx.blocking, exchange, text_bytes,
      [base = req->base, shared] {
        std::vector<CompletionPrompt> encoded = std::move(*shared);  // the work runs once
        for (CompletionPrompt& prompt : encoded) {
          if (prompt.text) prompt.ids = base->tokenizer()->encode(*prompt.text, /*add_special_tokens=*/true);
        }
        return encoded;
      },
      [ctx = &ctx, exchange, req, options](std::vector<CompletionPrompt> encoded) {
        submit_completion(*ctx, exchange, *req, options, std::move(encoded));
      });
}

}  // namespace

void handle_completions(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange) {
  parse_body_then(ctx, exchange, [&ctx, exchange](json body) { completion_with_body(ctx, exchange, std::move(body)); });
}

}  // namespace loragate

#include "gateway/openai/openai_chat.h"

#include <algorithm>
#include <array>
#include <limits>

#include "common/sha256.h"
#include "gateway/admin/blocking_work.h"
#include "gateway/openai/logprobs_format.h"
#include "gateway/openai/tool_choice.h"

namespace loragate {

using nlohmann::json;

ChatFormat::ChatFormat(CompletionMeta meta, const Tokenizer* tokenizer, int32_t n, ToolCallSyntax tools,
                       std::string function)
    : meta_(std::move(meta)), tokenizer_(tokenizer), n_(n), tools_(tools), function_(std::move(function)) {
  if (tools_ == ToolCallSyntax::kNone) return;
  for (int32_t i = 0; i < std::max(n_, 1); ++i) scanners_.emplace_back(tools_, function_);
}

json ChatFormat::chunk(int32_t index, json delta, json finish_reason) const {
  return {{"id", meta_.id},
          {"object", "chat.completion.chunk"},
          {"created", meta_.created},
          {"model", meta_.model},
          {"system_fingerprint", meta_.system_fingerprint},
          {"choices", json::array({{{"index", index},
                                    {"delta", std::move(delta)},
                                    {"finish_reason", std::move(finish_reason)},
                                    {"logprobs", nullptr}}})}};
}

json ChatFormat::full(const std::vector<GenerationResult>& results) const {
  json choices = json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const GenerationResult& result = results[i];
    json logprobs = nullptr;
    if (tokenizer_ != nullptr && !result.logprobs.empty()) logprobs = chat_logprobs(*tokenizer_, result);
    const auto index = static_cast<int32_t>(i);
    const ToolCallOutput output = parse_tool_calls(tools_, function_, result.text);
    // A choice that made calls and ended of itself finished with them (OpenAI's reason).
    const bool called = !output.calls.empty() && result.finish_reason == FinishReason::kStop;
    choices.push_back({{"index", index},
                       {"message", message(index, output)},
                       {"finish_reason", called ? "tool_calls" : openai_finish_reason(result.finish_reason)},
                       {"logprobs", std::move(logprobs)}});
  }
  return {{"id", meta_.id},
          {"object", "chat.completion"},
          {"created", meta_.created},
          {"model", meta_.model},
          {"system_fingerprint", meta_.system_fingerprint},
          {"choices", std::move(choices)},
          {"usage", usage_json(count_usage(results, n_))}};
}

std::vector<json> ChatFormat::opening() const {
  std::vector<json> chunks;
  for (int32_t i = 0; i < std::max(n_, 1); ++i) chunks.push_back(chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr));
  return chunks;
}

json ChatFormat::message(int32_t index, const ToolCallOutput& output) const {
  json message = {{"role", "assistant"}, {"content", output.content ? json(*output.content) : json(nullptr)}};
  if (output.calls.empty()) return message;
  json calls = json::array();
  for (size_t k = 0; k < output.calls.size(); ++k) {
    calls.push_back({{"id", call_id(index, static_cast<int32_t>(k))},
                     {"type", "function"},
                     {"function", {{"name", output.calls[k].name}, {"arguments", output.calls[k].arguments}}}});
  }
  message["tool_calls"] = std::move(calls);
  return message;
}

std::string ChatFormat::call_id(int32_t index, int32_t call) const {
  return "call_" + sha256_hex(meta_.id + "/" + std::to_string(index) + "/" + std::to_string(call)).substr(0, 24);
}

// A call's first fragment carries its id, type and name (and the arguments
// read with it); later ones carry only more arguments: OpenAI's stream shape.
std::vector<json> ChatFormat::event_chunks(int32_t index, const std::vector<ToolCallEvent>& events) const {
  std::vector<json> chunks;
  for (size_t i = 0; i < events.size(); ++i) {
    const ToolCallEvent& e = events[i];
    if (e.kind == ToolCallEvent::Kind::kContent) {
      chunks.push_back(chunk(index, {{"content", e.text}}, nullptr));
      continue;
    }
    json call = {{"index", e.call}};
    if (e.kind == ToolCallEvent::Kind::kCallBegin) {
      std::string arguments;
      if (i + 1 < events.size() && events[i + 1].kind == ToolCallEvent::Kind::kArguments && events[i + 1].call == e.call) {
        arguments = events[++i].text;
      }
      call["id"] = call_id(index, e.call);
      call["type"] = "function";
      call["function"] = {{"name", e.text}, {"arguments", std::move(arguments)}};
    } else {
      call["function"] = {{"arguments", e.text}};
    }
    chunks.push_back(chunk(index, {{"tool_calls", json::array({std::move(call)})}}, nullptr));
  }
  return chunks;
}

std::vector<json> ChatFormat::delta(int32_t index, std::string_view text) {
  if (scanners_.empty()) return {chunk(index, {{"content", text}}, nullptr)};
  return event_chunks(index, scanners_[static_cast<size_t>(index)].feed(text));
}

std::vector<json> ChatFormat::finish(int32_t index, std::string_view text, std::string_view finish_reason) {
  if (scanners_.empty()) return {chunk(index, text.empty() ? json::object() : json{{"content", text}}, finish_reason)};
  ToolCallScanner& scanner = scanners_[static_cast<size_t>(index)];
  std::vector<ToolCallEvent> events = scanner.feed(text);
  for (ToolCallEvent& e : scanner.finish()) events.push_back(std::move(e));
  std::vector<json> chunks = event_chunks(index, events);
  const bool called = scanner.calls() > 0 && finish_reason == "stop";
  chunks.push_back(chunk(index, json::object(), called ? "tool_calls" : finish_reason));
  return chunks;
}

json ChatFormat::usage(const std::vector<GenerationResult>& results) const {
  json body = chunk(0, json::object(), nullptr);
  body["choices"] = json::array();
  body["usage"] = usage_json(count_usage(results, n_));
  return body;
}

std::optional<ApiError> read_chat_messages(const json& body, json* messages) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return bad_request("messages is required", "messages");
  if (!it->is_array() || it->empty()) return bad_request("messages must be a non-empty list", "messages");
  static constexpr std::array<const char*, 5> kRoles = {"system", "developer", "user", "assistant", "tool"};
  *messages = json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad_request(where + " must be an object", "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return bad_request(where + ".role must be a string", "messages");
    const std::string r = role->get<std::string>();
    if (std::find(kRoles.begin(), kRoles.end(), r) == kRoles.end()) {
      return bad_request(where + ".role must be one of system, developer, user, assistant, tool; got '" + r + "'",
                         "messages");
    }
    json out = m;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (r != "assistant") return bad_request(where + ".content is required", "messages");
      out["content"] = nullptr;
    } else if (content->is_string()) {
      // kept as is
    } else if (content->is_array()) {
      std::string text;
      for (const json& part : *content) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          return bad_request(where + ".content: only text parts ({\"type\": \"text\", \"text\": ...}) are supported",
                             "messages");
        }
        if (!text.empty()) text += "\n";
        text += part["text"].get<std::string>();
      }
      out["content"] = text;
    } else {
      return bad_request(where + ".content must be a string or a list of text parts", "messages");
    }
    messages->push_back(std::move(out));
  }
  return std::nullopt;
}

namespace {

// `logprobs: true` with `top_logprobs: k` (0..20) -> k; no logprobs -> -1.
std::optional<ApiError> read_chat_logprobs(const json& body, bool stream, int32_t* out) {
  bool logprobs = false;
  if (auto err = read_bool(body, "logprobs", &logprobs)) return err;
  int64_t top = -1;
  if (auto err = read_int(body, "top_logprobs", 0, 20, "an integer from 0 to 20", &top)) return err;
  if (top >= 0 && !logprobs) return bad_request("top_logprobs needs logprobs: true", "top_logprobs");
  if (logprobs && stream) return bad_request("logprobs with stream is not supported yet", "logprobs");
  *out = logprobs ? static_cast<int32_t>(std::max<int64_t>(top, 0)) : -1;
  return std::nullopt;
}

std::optional<ApiError> refuse_unsupported_chat_fields(const json& body) {
  if (body.contains("continue_final_message") && body["continue_final_message"] == true) {
    return bad_request("continue_final_message is not supported yet", "continue_final_message");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> read_chat_template_vars(const json& body, json* vars) {
  *vars = json::object();
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) {
      return bad_request("chat_template_kwargs must be an object", "chat_template_kwargs");
    }
    *vars = body["chat_template_kwargs"];
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return bad_request("tools must be a list", "tools");
    (*vars)["tools"] = body["tools"];
  }
  return std::nullopt;
}

namespace {

// Bytes of message text: the rendered prompt holds at least these.
int64_t content_bytes(const json& messages) {
  int64_t bytes = 0;
  for (const json& m : messages) {
    auto content = m.find("content");
    if (content != m.end() && content->is_string()) {
      bytes += static_cast<int64_t>(content->get_ref<const std::string&>().size());
    }
  }
  return bytes;
}

}  // namespace

ChatPrompt render_chat_prompt(const ServingBase& base, const json& messages, bool add_generation_prompt,
                              const json& vars, bool add_special_tokens) {
  Result<std::string> text = base.chat_template().render(messages, add_generation_prompt, vars);
  if (!text.is_ok()) {
    return {{}, ApiError{http_status_for(text.status(), /*about_size=*/true), "chat template: " + text.status().message(),
                         "messages", ""}};
  }
  return {base.tokenizer()->encode(text.value(), add_special_tokens), std::nullopt};
}

namespace {

// On the exchange's strand, once the prompt is tokenised.
void submit_chat(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange, const OpenAiRequest& req,
                 const ToolChoice& tools, int32_t logprobs, std::vector<int32_t> prompt_ids) {
  const ServingBase& base = *req.base;
  GenerationCall call;
  call.base = req.base;
  GenerationRequest& request = call.requests.emplace_back();
  request.prompt_ids = std::move(prompt_ids);
  request.params = req.fields.params;
  request.params.logprobs = logprobs;
  if (tools.grammar) request.params.grammar = tools.grammar;
  if (request.params.max_tokens < 0) {  // OpenAI's default: as much as the context leaves
    const int64_t prompt = static_cast<int64_t>(request.prompt_ids.size());
    const int64_t room = base.max_model_len() - prompt;
    if (room <= 0) {  // else it would answer 200 with nothing generated
      return exchange->respond(bad_request("the rendered prompt is " + std::to_string(prompt) +
                                               " tokens: no room left to generate within the model length of " +
                                               std::to_string(base.max_model_len()),
                                           "messages")
                                   .to_response());
    }
    // max_model_len is capped at the KV pool and int32 positions (Engine::create); clamp anyway, never wrap.
    request.params.max_tokens = static_cast<int32_t>(std::min<int64_t>(room, std::numeric_limits<int32_t>::max()));
  }
  request.adapter = req.choice.adapter;
  request.cache_salt = req.fields.cache_salt;
  // n sequences of the one prompt; with a seed, choice i samples with seed + i (vLLM's rule).
  const int32_t n = req.fields.n;
  call.n = n;
  call.requests.reserve(static_cast<size_t>(n));  // `request` is not used past here
  for (int32_t i = 1; i < n; ++i) {
    call.requests.push_back(call.requests.front());
    SamplingParams& params = call.requests.back().params;
    if (params.seed) params.seed = *params.seed + static_cast<uint64_t>(i);  // unsigned: wraps at 2^64
  }
  call.stream = req.fields.stream;
  call.include_usage = req.fields.include_usage;
  call.format = std::make_shared<ChatFormat>(
      CompletionMeta{make_response_id("chatcmpl-", exchange->record().id), unix_now(), req.response_model,
                     base.fingerprint()},
      base.tokenizer(), n, tools.syntax, tools.function);
  ctx.runner->run(exchange, std::move(call));
}

// On the exchange's strand, once the body is parsed.
void chat_with_body(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange, json parsed) {
  auto req = std::make_shared<OpenAiRequest>();
  if (auto err = read_openai_request(ctx, *exchange, std::move(parsed), /*chat=*/true, req.get())) {
    return exchange->respond(err->to_response());
  }
  const json& body = req->body;
  if (auto err = refuse_unsupported_chat_fields(body)) return exchange->respond(err->to_response());
  auto tools = std::make_shared<ToolChoice>();
  if (auto err = read_tool_choice(body, exchange->request().body(), req->base->chat_template(), ctx.tool_call_parser,
                                  tools.get())) {
    return exchange->respond(err->to_response());
  }
  if (tools->grammar && req->fields.params.grammar) {
    return exchange->respond(bad_request("tool_choice \"required\" or a named function constrains the output to the "
                                         "tools' schemas: it cannot be combined with response_format or guided_*",
                                         "tool_choice")
                                 .to_response());
  }
  json messages, vars;
  if (auto err = read_chat_messages(body, &messages)) return exchange->respond(err->to_response());
  if (auto err = read_chat_template_vars(body, &vars)) return exchange->respond(err->to_response());
  bool add_generation_prompt = true;  // vLLM extension
  if (auto err = read_bool(body, "add_generation_prompt", &add_generation_prompt)) {
    return exchange->respond(err->to_response());
  }
  if (body.contains("prompt_logprobs") && !body["prompt_logprobs"].is_null()) {
    return exchange->respond(
        bad_request("prompt_logprobs is supported on /v1/completions only", "prompt_logprobs").to_response());
  }
  int32_t logprobs = -1;
  if (auto err = read_chat_logprobs(body, req->fields.stream, &logprobs)) return exchange->respond(err->to_response());
  if (req->base->tokenizer() == nullptr) {
    return exchange->respond(
        bad_request("this model has no tokenizer: use /v1/completions with token ids", "messages").to_response());
  }
  if (auto err = ctx.prompt_limit->check(req->base, content_bytes(messages), "the messages", "messages")) {
    return exchange->respond(err->to_response());
  }
  // Rendering and tokenising take time in proportion to the text (messages
  // and tools, so the body's size): a long one not on a network thread.
  run_off_strand_if_large(
      *ctx.blocking, exchange, exchange->request().body().size(),
      [base = req->base, messages = std::move(messages), vars = std::move(vars), add_generation_prompt] {
        return render_chat_prompt(*base, messages, add_generation_prompt, vars);
      },
      [ctx = &ctx, exchange, req, tools, logprobs](ChatPrompt prompt) {
        if (prompt.error) return exchange->respond(prompt.error->to_response());
        submit_chat(*ctx, exchange, *req, *tools, logprobs, std::move(prompt.ids));
      });
}

}  // namespace

void handle_chat_completions(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange) {
  parse_body_then(ctx, exchange, [&ctx, exchange](json body) { chat_with_body(ctx, exchange, std::move(body)); });
}

}  // namespace loragate

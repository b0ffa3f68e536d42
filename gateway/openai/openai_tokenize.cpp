#include "gateway/openai/openai_tokenize.h"

#include <string>
#include <vector>

#include "gateway/admin/blocking_work.h"
#include "gateway/openai/openai_chat.h"

namespace loragate {

using nlohmann::json;

namespace {

// The base whose tokenizer answers: `model` and `scenario` (or X-Scenario)
// resolved as on the completion routes, so that an unknown name is the same 404.
std::optional<ApiError> tokenizer_base(const ApiContext& ctx, Exchange& exchange, const json& body,
                                       std::shared_ptr<ServingBase>* base) {
  std::string model;
  std::string scenario;
  if (auto err = read_string(body, "model", &model)) return err;
  if (auto err = read_string(body, "scenario", &scenario)) return err;
  ModelChoice choice;  // adapters share their base's tokenizer: checked, not used
  std::string response_model;
  if (auto err = resolve_request_target(ctx, exchange, model, scenario, base, &choice, &response_model)) return err;
  if ((*base)->tokenizer() == nullptr) {
    return bad_request("base '" + (*base)->name() + "' has no tokenizer: it takes and returns token ids only", "model");
  }
  return std::nullopt;
}

// What /tokenize was asked, read whole before anything is encoded.
struct TokenizeAsk {
  std::optional<std::string> text;  // the completion form; else the chat form:
  json messages;                    //   as read_chat_messages returns them
  json vars;                        //   chat_template_kwargs and tools
  bool add_generation_prompt = true;
  bool add_special_tokens = true;   // the chat form's default is false: its template writes BOS
  bool return_token_strs = false;
};

std::optional<ApiError> read_tokenize_ask(const json& body, TokenizeAsk* ask) {
  const bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  const bool has_messages = body.contains("messages") && !body["messages"].is_null();
  if (has_prompt && has_messages) return bad_request("give either prompt or messages, not both", "messages");
  if (auto err = read_bool(body, "return_token_strs", &ask->return_token_strs)) return err;
  if (!has_messages) {
    if (!has_prompt) return bad_request("prompt (a string) or messages (a chat) is required", "prompt");
    if (!body["prompt"].is_string()) {
      return bad_request(std::string("prompt must be a string, got ") + body["prompt"].type_name(), "prompt");
    }
    ask->text = body["prompt"].get<std::string>();
    return read_bool(body, "add_special_tokens", &ask->add_special_tokens);
  }
  ask->add_special_tokens = false;
  if (auto err = read_bool(body, "add_special_tokens", &ask->add_special_tokens)) return err;
  if (auto err = read_bool(body, "add_generation_prompt", &ask->add_generation_prompt)) return err;
  bool continue_final_message = false;  // as /v1/chat/completions: not rendered yet
  if (auto err = read_bool(body, "continue_final_message", &continue_final_message)) return err;
  if (continue_final_message) {
    return bad_request("continue_final_message is not supported yet", "continue_final_message");
  }
  if (auto err = read_chat_messages(body, &ask->messages)) return err;
  return read_chat_template_vars(body, &ask->vars);
}

// The answer's body, or why there is none.
struct TokenizeAnswer {
  json body;
  std::optional<ApiError> error;
};

TokenizeAnswer tokenize(const ServingBase& base, const TokenizeAsk& ask) {
  const Tokenizer& tokenizer = *base.tokenizer();
  ChatPrompt prompt;
  if (ask.text) {
    prompt.ids = tokenizer.encode(*ask.text, ask.add_special_tokens);
  } else {
    prompt = render_chat_prompt(base, ask.messages, ask.add_generation_prompt, ask.vars, ask.add_special_tokens);
    if (prompt.error) return {json(), std::move(prompt.error)};
  }
  json body = {{"count", prompt.ids.size()}, {"max_model_len", base.max_model_len()}, {"tokens", prompt.ids}};
  if (ask.return_token_strs) {
    json strs = json::array();
    for (int32_t id : prompt.ids) strs.push_back(tokenizer.id_to_token(id));
    body["token_strs"] = std::move(strs);
  }
  return {std::move(body), std::nullopt};
}

// On the exchange's strand, once the body is parsed.
void tokenize_with_body(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange, const json& body) {
  std::shared_ptr<ServingBase> base;
  if (auto err = tokenizer_base(ctx, *exchange, body, &base)) return exchange->respond(err->to_response());
  TokenizeAsk ask;
  if (auto err = read_tokenize_ask(body, &ask)) return exchange->respond(err->to_response());
  // Rendering and encoding take time in proportion to the body: a large one not on a network thread.
  run_off_strand_if_large(
      *ctx.blocking, exchange, exchange->request().body().size(),
      [base, ask = std::move(ask)] { return tokenize(*base, ask); },
      [exchange](TokenizeAnswer answer) {
        if (answer.error) return exchange->respond(answer.error->to_response());
        exchange->respond(json_response(http::status::ok, answer.body));
      });
}

// `tokens`: a list of at most kMaxDetokenizeTokens integer ids, each in the vocabulary.
std::optional<ApiError> read_detokenize_ids(const json& body, int32_t vocab_size, std::vector<int32_t>* ids) {
  auto it = body.find("tokens");
  if (it == body.end() || it->is_null()) return bad_request("tokens is required", "tokens");
  if (!it->is_array()) {
    return bad_request(std::string("tokens must be a list of token ids, got ") + it->type_name(), "tokens");
  }
  if (it->size() > kMaxDetokenizeTokens) {
    return bad_request("tokens holds " + std::to_string(it->size()) + " ids; at most " +
                           std::to_string(kMaxDetokenizeTokens) + " are decoded at once",
                       "tokens");
  }
  ids->reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    const std::string where = "tokens[" + std::to_string(i) + "]";
    if (!v.is_number_integer()) return bad_request(where + " must be an integer token id, got " + v.type_name(), "tokens");
    // Unsigned first: a huge unsigned id must not read as a negative one.
    const bool in_vocab = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                                                 : v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab_size;
    if (!in_vocab) {
      return bad_request(where + " = " + v.dump() + " is outside the vocabulary (ids 0 to " +
                             std::to_string(vocab_size - 1) + ")",
                         "tokens");
    }
    ids->push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return std::nullopt;
}

// On the exchange's strand, once the body is parsed.
void detokenize_with_body(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange, const json& body) {
  std::shared_ptr<ServingBase> base;
  if (auto err = tokenizer_base(ctx, *exchange, body, &base)) return exchange->respond(err->to_response());
  std::vector<int32_t> ids;
  if (auto err = read_detokenize_ids(body, base->tokenizer()->vocab_size(), &ids)) {
    return exchange->respond(err->to_response());
  }
  // As vLLM (HF's decode default): special tokens are kept in the text.
  run_off_strand_if_large(
      *ctx.blocking, exchange, exchange->request().body().size(),
      [base, ids = std::move(ids)] { return base->tokenizer()->decode(ids, /*skip_special_tokens=*/false); },
      [exchange](std::string text) {
        exchange->respond(json_response(http::status::ok, {{"prompt", std::move(text)}}));
      });
}

}  // namespace

void handle_tokenize(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange) {
  parse_body_then(ctx, exchange, [&ctx, exchange](json body) { tokenize_with_body(ctx, exchange, body); });
}

void handle_detokenize(const ApiContext& ctx, const std::shared_ptr<Exchange>& exchange) {
  parse_body_then(ctx, exchange, [&ctx, exchange](json body) { detokenize_with_body(ctx, exchange, body); });
}

}  // namespace loragate

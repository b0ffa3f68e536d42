#include "gateway/openai/logprobs_format.h"

#include <algorithm>

namespace loragate {
namespace {

using nlohmann::json;

// Decoded text that `token` adds after `context` (the last few ids before it).
std::string piece(const Tokenizer& tokenizer, std::vector<int32_t>& context, int32_t token) {
  const std::string before = tokenizer.decode(context, /*skip_special_tokens=*/false);
  context.push_back(token);
  const std::string after = tokenizer.decode(context, /*skip_special_tokens=*/false);
  context.pop_back();
  if (after.compare(0, before.size(), before) == 0) return after.substr(before.size());
  return tokenizer.decode(std::vector<int32_t>{token}, /*skip_special_tokens=*/false);
}

// The ids before output token `i`: up to four, from the prompt and the output.
std::vector<int32_t> context_before(const GenerationResult& r, size_t i) {
  std::vector<int32_t> all(r.prompt_ids.end() - std::min<size_t>(r.prompt_ids.size(), 4), r.prompt_ids.end());
  all.insert(all.end(), r.output_ids.begin(), r.output_ids.begin() + static_cast<std::ptrdiff_t>(i));
  if (all.size() > 4) all.erase(all.begin(), all.end() - 4);
  return all;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(c);
  return b;
}

}  // namespace

json completion_logprobs(const Tokenizer& tokenizer, const GenerationResult& r, bool echo_prompt) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  size_t offset = 0;
  // One entry: `lp` null for a token nothing predicted (the prompt's first).
  auto add = [&](std::vector<int32_t> context, int32_t token, const TokenLogprobs* lp) {
    const std::string text = piece(tokenizer, context, token);
    tokens.push_back(text);
    offsets.push_back(offset);
    offset += text.size();
    if (lp == nullptr) {
      token_logprobs.push_back(nullptr);
      top.push_back(nullptr);
      return;
    }
    token_logprobs.push_back(lp->logprob);
    json alternatives = json::object();
    for (const auto& [id, logprob] : lp->top) alternatives[piece(tokenizer, context, id)] = logprob;
    top.push_back(std::move(alternatives));
  };
  if (echo_prompt) {
    const size_t scored_from = r.prompt_ids.size() - r.prompt_logprobs.size();
    for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
      const size_t from = i >= 4 ? i - 4 : 0;
      std::vector<int32_t> context(r.prompt_ids.begin() + static_cast<std::ptrdiff_t>(from),
                                   r.prompt_ids.begin() + static_cast<std::ptrdiff_t>(i));
      add(std::move(context), r.prompt_ids[i], i >= scored_from ? &r.prompt_logprobs[i - scored_from] : nullptr);
    }
  }
  for (size_t i = 0; i < r.logprobs.size(); ++i) add(context_before(r, i), r.logprobs[i].token, &r.logprobs[i]);
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json vllm_prompt_logprobs(const Tokenizer& tokenizer, const GenerationResult& r) {
  json out = json::array();
  const size_t scored_from = r.prompt_ids.size() - r.prompt_logprobs.size();
  for (size_t i = 0; i < scored_from; ++i) out.push_back(nullptr);
  for (const TokenLogprobs& lp : r.prompt_logprobs) {
    json entry = json::object();
    auto put = [&](int32_t id, float logprob, json rank) {
      const std::string text = tokenizer.decode(std::vector<int32_t>{id}, /*skip_special_tokens=*/false);
      entry[std::to_string(id)] = {{"logprob", logprob}, {"rank", std::move(rank)}, {"decoded_token", text}};
    };
    for (size_t k = 0; k < lp.top.size(); ++k) put(lp.top[k].first, lp.top[k].second, static_cast<int64_t>(k + 1));
    if (!entry.contains(std::to_string(lp.token))) put(lp.token, lp.logprob, lp.rank);
    out.push_back(std::move(entry));
  }
  return out;
}

json chat_logprobs(const Tokenizer& tokenizer, const GenerationResult& r) {
  json content = json::array();
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    std::vector<int32_t> context = context_before(r, i);
    const TokenLogprobs& lp = r.logprobs[i];
    const std::string text = piece(tokenizer, context, lp.token);
    json alternatives = json::array();
    for (const auto& [id, logprob] : lp.top) {
      const std::string alt = piece(tokenizer, context, id);
      alternatives.push_back({{"token", alt}, {"logprob", logprob}, {"bytes", bytes_of(alt)}});
    }
    content.push_back({{"token", text}, {"logprob", lp.logprob}, {"bytes", bytes_of(text)},
                       {"top_logprobs", std::move(alternatives)}});
  }
  return {{"content", std::move(content)}};
}

}  // namespace loragate

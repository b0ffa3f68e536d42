#include "gateway/logprobs_format.h"

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

json completion_logprobs(const Tokenizer& tokenizer, const GenerationResult& r) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    std::vector<int32_t> context = context_before(r, i);
    const TokenLogprobs& lp = r.logprobs[i];
    const std::string text = piece(tokenizer, context, lp.token);
    tokens.push_back(text);
    token_logprobs.push_back(lp.logprob);
    offsets.push_back(offset);
    offset += text.size();
    json alternatives = json::object();
    for (const auto& [id, logprob] : lp.top) alternatives[piece(tokenizer, context, id)] = logprob;
    top.push_back(std::move(alternatives));
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
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

#include "gateway/openai/prompt_size_limit.h"

#include <algorithm>

namespace loragate {
namespace {

// Normalisers may shrink text before it is split (NFC composes three 3-byte
// Hangul jamo into one 3-byte syllable): 4 leaves room for that.
constexpr int64_t kNormaliserSlack = 4;

int64_t longest_piece_bytes(const Tokenizer& tokenizer) {
  int64_t longest = 1;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(tokenizer.id_to_token(id).size()));
  }
  return longest;
}

}  // namespace

int64_t PromptSizeLimit::max_prompt_bytes(const std::shared_ptr<ServingBase>& base) {
  const Tokenizer* tokenizer = base->tokenizer();
  if (tokenizer == nullptr) return 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = known_.find(base.get());
    if (it != known_.end() && !it->second.base.expired()) return it->second.max_bytes;
  }
  const int64_t bytes = base->max_model_len() * longest_piece_bytes(*tokenizer) * kNormaliserSlack;
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(known_, [](const auto& entry) { return entry.second.base.expired(); });
  known_[base.get()] = Known{base, bytes};
  return bytes;
}

std::optional<ApiError> PromptSizeLimit::check(const std::shared_ptr<ServingBase>& base, int64_t text_bytes,
                                               const std::string& what, const std::string& param) {
  const int64_t max_bytes = max_prompt_bytes(base);
  if (max_bytes <= 0 || text_bytes <= max_bytes) return std::nullopt;
  return ApiError{http::status::bad_request,
                  what + " hold " + std::to_string(text_bytes) + " bytes of text, more than the " +
                      std::to_string(max_bytes) + " bytes that can fit in the model length of " +
                      std::to_string(base->max_model_len()) + " tokens of base '" + base->name() +
                      "': shorten the prompt",
                  param, "context_length_exceeded"};
}

}  // namespace loragate

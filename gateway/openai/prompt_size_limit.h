// PromptSizeLimit: the most bytes of prompt text that can still fit in a
// base's model length, so that a body far too long is refused (400) before
// it is rendered and tokenised — work that takes time in proportion to the
// text, up to a second for a megabyte.
//
// The bound: no token stands for more bytes than the longest piece of the
// vocabulary, and normalisers (NFC composition) shrink text at most
// threefold, so text of more than
//     max_model_len x longest piece x 4   bytes
// cannot encode to max_model_len tokens. It errs towards letting a prompt
// through: the engine still checks the exact token count.
//
// Computed once per base (a scan of its vocabulary) and forgotten with it.
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "bases/serving_base.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

class PromptSizeLimit {
 public:
  // The bound for `base`'s prompts; 0 when it has no tokenizer (no text prompts).
  int64_t max_prompt_bytes(const std::shared_ptr<ServingBase>& base);
  // A 400 naming `param` and the bound when `text_bytes` of `what` ("the
  // messages") exceed it.
  std::optional<ApiError> check(const std::shared_ptr<ServingBase>& base, int64_t text_bytes, const std::string& what,
                                const std::string& param);

 private:
  struct Known {
    std::weak_ptr<ServingBase> base;  // expired: the address may be another base's now
    int64_t max_bytes = 0;
  };
  std::mutex mu_;
  std::map<const ServingBase*, Known> known_;  // guarded by mu_
};

}  // namespace loragate

// Post-processors of tokenizer.json ("post_processor"): the special tokens that
// encode(text, add_special_tokens=true) puts around a single sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/json_util.h"

namespace loragate::tok {

class PostProcessor {
 public:
  // Supported: TemplateProcessing, ByteLevel (no-op for ids), RobertaProcessing,
  // BertProcessing and Sequence of those. `j` may be null (no post-processor).
  static Result<PostProcessor> make(const Json& j, const std::string& where);

  // Wraps `ids` in the single-sequence template(s).
  std::vector<int32_t> process(const std::vector<int32_t>& ids) const;
  // True when process() adds any token.
  bool adds_tokens() const;
  // The first id the template puts before / after the sequence, if any.
  std::optional<int32_t> leading_id() const;
  std::optional<int32_t> trailing_id() const;

 private:
  // One template: special ids before and after the sequence.
  struct Template {
    std::vector<int32_t> before, after;
  };
  Status add(const Json& j, const std::string& where);
  std::vector<Template> steps_;
};

}  // namespace loragate::tok

#include "gateway/response_format.h"

#include <chrono>
#include <cstdio>
#include <random>

namespace loragate {

nlohmann::json usage_json(const GenerationResult& result) {
  const int64_t prompt = static_cast<int64_t>(result.prompt_ids.size());
  const int64_t completion = static_cast<int64_t>(result.output_ids.size());
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", result.cached_tokens}}}};
}

const char* openai_finish_reason(FinishReason reason) {
  return reason == FinishReason::kLength ? "length" : "stop";
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string make_response_id(const std::string& prefix, uint64_t request_id) {
  // A random tag per process keeps ids unique across restarts.
  static const std::string tag = [] {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(std::random_device{}()));
    return std::string(buf);
  }();
  return prefix + tag + "-" + std::to_string(request_id);
}

}  // namespace loragate

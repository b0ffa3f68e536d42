#include "gateway/openai/response_format.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

namespace loragate {

UsageCounts count_usage(const std::vector<GenerationResult>& results, int32_t n) {
  UsageCounts counts;
  const size_t per_prompt = static_cast<size_t>(std::max(n, 1));
  for (size_t first = 0; first < results.size(); first += per_prompt) {
    const size_t end = std::min(results.size(), first + per_prompt);
    int64_t cached = results[first].cached_tokens;
    for (size_t i = first; i < end; ++i) {
      counts.completion_tokens += static_cast<int64_t>(results[i].output_ids.size());
      cached = std::min(cached, results[i].cached_tokens);
    }
    counts.prompt_tokens += static_cast<int64_t>(results[first].prompt_ids.size());
    counts.cached_tokens += cached;
  }
  return counts;
}

nlohmann::json usage_json(const UsageCounts& counts) {
  return {{"prompt_tokens", counts.prompt_tokens},
          {"completion_tokens", counts.completion_tokens},
          {"total_tokens", counts.prompt_tokens + counts.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", counts.cached_tokens}}}};
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

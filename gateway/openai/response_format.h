// ResponseFormat: how one OpenAI route shapes a generation's answer — the
// whole response, and the chunks of its server-sent-event stream. Each
// request gets its own (it carries the response id, created time and model).
// Used on the connection's strand only: a format may keep per-choice state
// for its stream (a chat's tool-call scanners), so delta() and finish() are
// not const.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/api.h"

namespace loragate {

// The identity every response and chunk of one request repeats.
struct CompletionMeta {
  std::string id;        // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;   // unix seconds
  std::string model;     // the model name the client asked for (or the served name)
  std::string system_fingerprint;  // "<base>-<sha8>": which base generation answered
};

// A request's choices are numbered in order: with several prompts (a
// /v1/completions prompt list) and n choices each, choice p * n + j is prompt
// p's j-th (OpenAI's and vLLM's order); `results` has one entry per choice.
class ResponseFormat {
 public:
  virtual ~ResponseFormat() = default;
  // The non-streaming response body, every choice finished.
  virtual nlohmann::json full(const std::vector<GenerationResult>& results) const = 0;
  // Chunks sent before the first token (chat: the assistant role of each choice).
  virtual std::vector<nlohmann::json> opening() const { return {}; }
  // The chunks carrying newly generated text of choice `index` (none while
  // the format holds text back).
  virtual std::vector<nlohmann::json> delta(int32_t index, std::string_view text) = 0;
  // Choice `index`'s last chunks: any remaining text, then its finish reason.
  virtual std::vector<nlohmann::json> finish(int32_t index, std::string_view text, std::string_view finish_reason) = 0;
  // The usage chunk (stream_options.include_usage): no choices, usage of them all.
  virtual nlohmann::json usage(const std::vector<GenerationResult>& results) const = 0;
};

// The token counts of a request's choices, `n` per prompt. As vLLM counts:
// a prompt's tokens once however many choices it has, the generated tokens
// of every choice; cached tokens once per prompt too (the fewest any of its
// choices found cached, so they never exceed its prompt tokens).
struct UsageCounts {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};
UsageCounts count_usage(const std::vector<GenerationResult>& results, int32_t n);

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}}: as OpenAI answers, cached_tokens
// being the prompt tokens the prefix cache served (0 when none).
nlohmann::json usage_json(const UsageCounts& counts);

// "length" or "stop" for a finished result (other reasons map to "stop").
const char* openai_finish_reason(FinishReason reason);
// Seconds since the epoch.
int64_t unix_now();
// A process-unique id with `prefix`: "cmpl-5f3a9c21-42".
std::string make_response_id(const std::string& prefix, uint64_t request_id);

}  // namespace loragate

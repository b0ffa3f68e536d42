// ResponseFormat: how one OpenAI route shapes a generation's answer — the
// whole response, and the chunks of its server-sent-event stream. Each
// request gets its own (it carries the response id, created time and model).
// Immutable after construction; used on the connection's strand.
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

class ResponseFormat {
 public:
  virtual ~ResponseFormat() = default;
  // The non-streaming response body.
  virtual nlohmann::json full(const GenerationResult& result) const = 0;
  // Chunks sent before the first token (chat: the assistant role).
  virtual std::vector<nlohmann::json> opening() const { return {}; }
  // A chunk carrying newly generated text.
  virtual nlohmann::json delta(std::string_view text) const = 0;
  // The last chunk: any remaining text and the finish reason.
  virtual nlohmann::json finish(std::string_view text, std::string_view finish_reason) const = 0;
  // The usage chunk (stream_options.include_usage): no choices, usage set.
  virtual nlohmann::json usage(const GenerationResult& result) const = 0;
};

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}}: as OpenAI answers, cached_tokens
// being the prompt tokens the prefix cache served (0 when none).
nlohmann::json usage_json(const GenerationResult& result);
// "length" or "stop" for a finished result (other reasons map to "stop").
const char* openai_finish_reason(FinishReason reason);
// Seconds since the epoch.
int64_t unix_now();
// A process-unique id with `prefix`: "cmpl-5f3a9c21-42".
std::string make_response_id(const std::string& prefix, uint64_t request_id);

}  // namespace loragate

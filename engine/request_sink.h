// RequestSink: where an engine delivers one request's tokens and its end.
//
// Called on the engine's step thread, in order: on_token for every generated
// token (with the text that became final, possibly empty), then on_finish
// exactly once. Implementations must return quickly (hand off to their own
// thread or strand); they must not call back into the engine synchronously.
#pragma once

#include <cstdint>
#include <string_view>

namespace loragate {

struct GenerationResult;

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void on_token(int64_t request_id, int32_t token, std::string_view text_delta) = 0;
  virtual void on_finish(const GenerationResult& result) = 0;
};

}  // namespace loragate

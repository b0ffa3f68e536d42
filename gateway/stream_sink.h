// StreamSink: the RequestSink of one HTTP generation. The engine calls it on
// its step thread; it copies what it got and posts it to the exchange's
// strand, where it writes SSE chunks (streaming) or the whole response
// (otherwise). When the client goes away, the GenerationRunner cancels the
// engine request; the sink then only finishes its bookkeeping.
//
// Owned by the GenerationRunner's SinkLedger from submit until on_finish
// (and by the functions it posted); it holds the ledger, not the runner. detach() (at shutdown, once the network threads are
// gone) stops all further posts and drops the exchange, so that no session
// outlives its io_context through a sink the engine still holds.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "bases/serving_base.h"
#include "engine/api.h"
#include "gateway/http_exchange.h"
#include "gateway/response_format.h"

namespace loragate {

struct SinkLedger;
class ShadowPair;

class StreamSink final : public RequestSink, public std::enable_shared_from_this<StreamSink> {
 public:
  StreamSink(std::shared_ptr<Exchange> exchange, std::shared_ptr<const ResponseFormat> format, bool stream,
             bool include_usage, std::shared_ptr<SinkLedger> ledger, std::shared_ptr<ServingBase> base);

  // The engine's id for this request (0 until submit returned).
  void set_id(int64_t id);
  int64_t id() const;
  // The live end is also reported to this shadow copy's pair (may be null).
  void set_shadow(std::shared_ptr<ShadowPair> shadow) { shadow_ = std::move(shadow); }
  // The live request never ran: the shadow pair gets an empty live result.
  void abandon_shadow();
  // Cancels the engine request (once submitted).
  void cancel();
  ServingBase& base() const { return *base_; }
  // From now on nothing is posted to the exchange's strand, and the exchange
  // (with its session) is let go. For after the network threads are joined.
  void detach();

  void on_token(int64_t request_id, int32_t token, std::string_view text_delta) override;
  void on_finish(const GenerationResult& result) override;

 private:
  // On the strand.
  void deliver_token(std::string delta);
  void deliver_finish(const GenerationResult& result);
  void send_event(const nlohmann::json& chunk);

  std::shared_ptr<Exchange> exchange_;  // reset by detach(); otherwise used on the strand
  const std::shared_ptr<const ResponseFormat> format_;
  const bool stream_;
  const bool include_usage_;
  const std::shared_ptr<SinkLedger> ledger_;  // outlives the runner while this sink is live
  const std::shared_ptr<ServingBase> base_;  // keeps the base (and its loop) alive until the end
  std::shared_ptr<ShadowPair> shadow_;       // set before submit, read at the end

  mutable std::mutex mu_;
  int64_t id_ = 0;         // guarded by mu_
  bool detached_ = false;  // guarded by mu_

  // Strand-only state.
  std::string streamed_;   // text already sent in chunks
  int64_t tokens_ = 0;
};

}  // namespace loragate

// StreamSink: the engine-facing end of one HTTP generation, which runs one
// engine request per choice (n choices of each prompt). The engine calls
// each choice's RequestSink on its step thread; the sink copies what it got
// and posts it to the exchange's strand, where it writes SSE chunks
// (streaming: each choice's deltas and finish chunk as they come, then the
// usage of all and [DONE]) or, once every choice finished, the whole
// response. The first choice that fails answers the error (or ends the
// stream with the error event) and cancels the others. When the client goes
// away, the GenerationRunner cancels the engine requests; the sink then only
// finishes its bookkeeping.
//
// Owned by the GenerationRunner's SinkLedger from submit until its last
// choice's on_finish (and by the functions it posted); it holds the ledger,
// not the runner. detach() (at shutdown, once the network threads are gone)
// stops all further posts and drops the exchange, so that no session
// outlives its io_context through a sink the engine still holds.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bases/serving_base.h"
#include "engine/api.h"
#include "gateway/http/http_exchange.h"
#include "gateway/openai/response_format.h"

namespace loragate {

struct SinkLedger;
class ShadowPair;

class StreamSink final : public std::enable_shared_from_this<StreamSink> {
 public:
  // `choices` engine requests, `n` per prompt (for the usage counts).
  StreamSink(std::shared_ptr<Exchange> exchange, std::shared_ptr<ResponseFormat> format, bool stream,
             bool include_usage, int32_t choices, int32_t n, std::shared_ptr<SinkLedger> ledger,
             std::shared_ptr<ServingBase> base);
  StreamSink(const StreamSink&) = delete;
  StreamSink& operator=(const StreamSink&) = delete;

  // Where the engine delivers choice `index`'s tokens and end; lives as long as this sink.
  RequestSink* choice_sink(int32_t index) { return choices_[static_cast<size_t>(index)].get(); }
  // The engine's id for choice `index` (0 until submit returned).
  void set_id(int32_t index, int64_t id);
  // On the strand: submitting choice `index` failed after the choices before
  // it were submitted. Cancels those, answers `response`, and expects no end
  // from the choices never submitted.
  void submit_failed(int32_t index, HttpResponse response);
  // Choice 0's end is also reported to this shadow copy's pair (may be null).
  void set_shadow(std::shared_ptr<ShadowPair> shadow) { shadow_ = std::move(shadow); }
  // The live request never ran: the shadow pair gets an empty live result.
  void abandon_shadow();
  // Cancels every submitted engine request.
  void cancel();
  ServingBase& base() const { return *base_; }
  // From now on nothing is posted to the exchange's strand, and the exchange
  // (with its session) is let go. For after the network threads are joined.
  void detach();

 private:
  // One choice's RequestSink: forwards to the StreamSink with its index.
  class Choice final : public RequestSink {
   public:
    Choice(StreamSink* owner, int32_t index) : owner_(owner), index_(index) {}
    void on_token(int64_t, int32_t, std::string_view text_delta) override { owner_->on_token(index_, text_delta); }
    void on_finish(const GenerationResult& result) override { owner_->on_finish(index_, result); }

   private:
    StreamSink* const owner_;
    const int32_t index_;
  };

  // On the engine's step thread.
  void on_token(int32_t index, std::string_view text_delta);
  void on_finish(int32_t index, const GenerationResult& result);  // may destroy *this
  // Counts `ends` choices as over; the last hands the sink back to the ledger (which may destroy *this).
  void end_choices(int32_t ends);
  // On the strand.
  void deliver_token(int32_t index, std::string delta);
  void deliver_finish(int32_t index, GenerationResult result);
  void note_finished(const GenerationResult& result);
  void fail(const GenerationResult& result);
  void send_event(const nlohmann::json& chunk);

  std::shared_ptr<Exchange> exchange_;  // reset by detach(); otherwise used on the strand
  const std::shared_ptr<ResponseFormat> format_;  // used on the strand
  const bool stream_;
  const bool include_usage_;
  const int32_t n_;
  const std::shared_ptr<SinkLedger> ledger_;  // outlives the runner while this sink is live
  const std::shared_ptr<ServingBase> base_;   // keeps the base (and its loop) alive until the end
  std::shared_ptr<ShadowPair> shadow_;        // set before submit, read at the end
  std::vector<std::unique_ptr<Choice>> choices_;  // fixed at construction

  mutable std::mutex mu_;
  std::vector<int64_t> ids_;  // guarded by mu_; per choice, 0 = not submitted
  int32_t live_choices_;      // guarded by mu_; choices whose end is still to come
  bool detached_ = false;     // guarded by mu_

  // Strand-only state.
  std::vector<std::string> streamed_;       // per choice: text already sent in chunks
  std::vector<GenerationResult> results_;   // per choice, once finished
  int32_t finished_ = 0;                    // choices delivered
  bool answered_ = false;                   // the response, or the stream's end, is out
  int64_t tokens_ = 0;                      // tokens streamed, all choices
  int64_t finished_tokens_ = 0;             // tokens of the finished choices
};

}  // namespace loragate

#include "gateway/stream_sink.h"

#include "gateway/generation_runner.h"
#include "gateway/openai_errors.h"
#include "gateway/shadow_traffic.h"

namespace loragate {

StreamSink::StreamSink(std::shared_ptr<Exchange> exchange, std::shared_ptr<const ResponseFormat> format, bool stream,
                       bool include_usage, std::shared_ptr<SinkLedger> ledger, std::shared_ptr<ServingBase> base)
    : exchange_(std::move(exchange)),
      format_(std::move(format)),
      stream_(stream),
      include_usage_(include_usage),
      ledger_(std::move(ledger)),
      base_(std::move(base)) {}

void StreamSink::set_id(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  id_ = id;
}

int64_t StreamSink::id() const {
  std::lock_guard<std::mutex> lock(mu_);
  return id_;
}

void StreamSink::cancel() {
  const int64_t request = id();
  if (request > 0) base_->loop().cancel(request);
}

void StreamSink::detach() {
  std::shared_ptr<Exchange> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    detached_ = true;
    dropped = std::move(exchange_);
  }
}

void StreamSink::on_token(int64_t, int32_t, std::string_view text_delta) {
  if (!stream_) return;  // a whole response is written from on_finish alone
  std::lock_guard<std::mutex> lock(mu_);
  if (detached_) return;
  exchange_->post([self = shared_from_this(), delta = std::string(text_delta)]() mutable {
    self->deliver_token(std::move(delta));
  });
}

void StreamSink::abandon_shadow() {
  if (shadow_) shadow_->live_done(GenerationResult{});
}

void StreamSink::on_finish(const GenerationResult& result) {
  if (shadow_) shadow_->live_done(result);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!detached_) exchange_->post([self = shared_from_this(), result] { self->deliver_finish(result); });
  }
  // Held here: release() may destroy *this, and with it the sink's own reference.
  const std::shared_ptr<SinkLedger> ledger = ledger_;
  ledger->release(this);  // may destroy *this: nothing may follow
}

void StreamSink::send_event(const nlohmann::json& chunk) {
  exchange_->send_chunk("data: " + chunk.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n");
}

void StreamSink::deliver_token(std::string delta) {
  if (!exchange_) return;  // detached
  exchange_->record().completion_tokens = ++tokens_;
  if (delta.empty() || exchange_->client_gone()) return;
  streamed_ += delta;
  send_event(format_->delta(delta));
}

void StreamSink::deliver_finish(const GenerationResult& result) {
  if (!exchange_) return;  // detached
  RequestRecord& record = exchange_->record();
  record.prompt_tokens = static_cast<int64_t>(result.prompt_ids.size());
  record.completion_tokens = static_cast<int64_t>(result.output_ids.size());
  record.finish_reason = finish_reason_name(result.finish_reason);
  record.queue_ms = result.queue_ms;
  if (!result.output_ids.empty()) record.ttft_ms = result.ttft_ms;
  record.itl_ms = result.itl_ms;
  if (exchange_->client_gone()) return;

  const bool finished = result.finish_reason == FinishReason::kLength || result.finish_reason == FinishReason::kStop;
  const bool cancelled = result.finish_reason == FinishReason::kCancelled;
  // The engine's code picks the status from the one table (an adapter removed since submit: 404, one that
  // does not load: 503); a failure of unknown kind is the server's.
  const StatusCode code = cancelled                                 ? StatusCode::kCancelled
                          : result.error_code == StatusCode::kOk ? StatusCode::kInternal
                                                                  : result.error_code;
  const http::status failure = http_status_for(code);
  const std::string why = cancelled ? "the request was cancelled before it finished (the server is shutting down)"
                          : failure != http::status::internal_server_error
                              ? result.error
                              : "generation failed: " + (result.error.empty() ? std::string("unknown error")
                                                                               : result.error);
  if (!stream_) {
    exchange_->respond(finished ? json_response(http::status::ok, format_->full(result)) : error_response(failure, why));
    return;
  }
  if (finished) {
    // Text the engine held back (a possible stop string) and did not stream.
    std::string rest;
    if (result.text.size() >= streamed_.size() && result.text.compare(0, streamed_.size(), streamed_) == 0) {
      rest = result.text.substr(streamed_.size());
    }
    send_event(format_->finish(rest, openai_finish_reason(result.finish_reason)));
    if (include_usage_) send_event(format_->usage(result));
  } else {
    send_event(error_body(failure, why));
  }
  exchange_->send_chunk("data: [DONE]\n\n");
  exchange_->end_stream();
}

}  // namespace loragate

#include "gateway/openai/stream_sink.h"

#include <algorithm>

#include "gateway/openai/generation_runner.h"
#include "gateway/openai/openai_errors.h"
#include "gateway/shadow_traffic.h"

namespace loragate {

StreamSink::StreamSink(std::shared_ptr<Exchange> exchange, std::shared_ptr<ResponseFormat> format, bool stream,
                       bool include_usage, int32_t choices, int32_t n, std::shared_ptr<SinkLedger> ledger,
                       std::shared_ptr<ServingBase> base)
    : exchange_(std::move(exchange)),
      format_(std::move(format)),
      stream_(stream),
      include_usage_(include_usage),
      n_(n),
      ledger_(std::move(ledger)),
      base_(std::move(base)),
      ids_(static_cast<size_t>(choices), 0),
      live_choices_(choices),
      streamed_(static_cast<size_t>(choices)),
      results_(static_cast<size_t>(choices)) {
  for (int32_t i = 0; i < choices; ++i) choices_.push_back(std::make_unique<Choice>(this, i));
}

void StreamSink::set_id(int32_t index, int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  ids_[static_cast<size_t>(index)] = id;
}

void StreamSink::cancel() {
  std::vector<int64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ids = ids_;
  }
  for (int64_t id : ids) {
    if (id > 0) base_->loop().cancel(id);
  }
}

void StreamSink::submit_failed(int32_t index, HttpResponse response) {
  answered_ = true;  // the submitted choices' ends change nothing now
  cancel();
  if (exchange_) exchange_->respond(std::move(response));
  end_choices(static_cast<int32_t>(choices_.size()) - index);  // may destroy *this: nothing may follow
}

void StreamSink::detach() {
  std::shared_ptr<Exchange> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    detached_ = true;
    dropped = std::move(exchange_);
  }
}

void StreamSink::on_token(int32_t index, std::string_view text_delta) {
  if (!stream_) return;  // a whole response is written from the ends alone
  std::lock_guard<std::mutex> lock(mu_);
  if (detached_) return;
  exchange_->post([self = shared_from_this(), index, delta = std::string(text_delta)]() mutable {
    self->deliver_token(index, std::move(delta));
  });
}

void StreamSink::abandon_shadow() {
  if (shadow_) shadow_->live_done(GenerationResult{});
}

void StreamSink::on_finish(int32_t index, const GenerationResult& result) {
  if (shadow_ && index == 0) shadow_->live_done(result);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!detached_) exchange_->post([self = shared_from_this(), index, result] { self->deliver_finish(index, result); });
  }
  end_choices(1);  // may destroy *this: nothing may follow
}

void StreamSink::end_choices(int32_t ends) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_choices_ -= ends;
    last = live_choices_ == 0;
  }
  if (!last) return;
  // Held here: release() may destroy *this, and with it the sink's own reference.
  const std::shared_ptr<SinkLedger> ledger = ledger_;
  ledger->release(this);  // may destroy *this: nothing may follow
}

void StreamSink::send_event(const nlohmann::json& chunk) {
  exchange_->send_chunk("data: " + chunk.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n");
}

void StreamSink::deliver_token(int32_t index, std::string delta) {
  if (!exchange_) return;  // detached
  exchange_->record().completion_tokens = std::max(++tokens_, finished_tokens_);
  if (answered_ || delta.empty() || exchange_->client_gone()) return;
  streamed_[static_cast<size_t>(index)] += delta;
  for (const nlohmann::json& chunk : format_->delta(index, delta)) send_event(chunk);
}

// The record sums the choices: their tokens, the earliest queue time and
// first token, and every choice's gaps between tokens.
void StreamSink::note_finished(const GenerationResult& result) {
  RequestRecord& record = exchange_->record();
  finished_tokens_ += static_cast<int64_t>(result.output_ids.size());
  record.completion_tokens = std::max(tokens_, finished_tokens_);
  record.finish_reason = finish_reason_name(result.finish_reason);
  if (finished_ == 1 || result.queue_ms < record.queue_ms) record.queue_ms = result.queue_ms;
  if (!result.output_ids.empty() && (record.ttft_ms < 0 || result.ttft_ms < record.ttft_ms)) {
    record.ttft_ms = result.ttft_ms;
  }
  record.itl_ms.insert(record.itl_ms.end(), result.itl_ms.begin(), result.itl_ms.end());
}

void StreamSink::deliver_finish(int32_t index, GenerationResult result) {
  if (!exchange_) return;  // detached
  ++finished_;
  note_finished(result);
  if (answered_ || exchange_->client_gone()) return;
  const bool finished = result.finish_reason == FinishReason::kLength || result.finish_reason == FinishReason::kStop;
  if (!finished) return fail(result);
  if (stream_) {
    // Text the engine held back (a possible stop string) and did not stream.
    const std::string& streamed = streamed_[static_cast<size_t>(index)];
    std::string rest;
    if (result.text.size() >= streamed.size() && result.text.compare(0, streamed.size(), streamed) == 0) {
      rest = result.text.substr(streamed.size());
    }
    for (const nlohmann::json& chunk : format_->finish(index, rest, openai_finish_reason(result.finish_reason))) {
      send_event(chunk);
    }
  }
  results_[static_cast<size_t>(index)] = std::move(result);
  if (finished_ < static_cast<int32_t>(results_.size())) return;
  answered_ = true;
  if (!stream_) return exchange_->respond(json_response(http::status::ok, format_->full(results_)));
  if (include_usage_) send_event(format_->usage(results_));
  exchange_->send_chunk("data: [DONE]\n\n");
  exchange_->end_stream();
}

// A choice ended without finishing: the request fails as a whole, and the
// choices still running are cancelled.
void StreamSink::fail(const GenerationResult& result) {
  answered_ = true;
  if (results_.size() > 1) cancel();
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
  if (!stream_) return exchange_->respond(error_response(failure, why));
  send_event(error_body(failure, why));
  exchange_->send_chunk("data: [DONE]\n\n");
  exchange_->end_stream();
}

}  // namespace loragate

#include "gateway/openai/generation_runner.h"

#include <algorithm>
#include <vector>

#include "gateway/openai/openai_errors.h"
#include "gateway/openai/stream_sink.h"
#include "gateway/shadow_traffic.h"

namespace loragate {

GenerationRunner::GenerationRunner(int32_t max_in_flight)
    : max_in_flight_(max_in_flight), ledger_(std::make_shared<SinkLedger>()) {}

GenerationRunner::~GenerationRunner() = default;

namespace {

// The answer to a submit the engine refused.
HttpResponse submit_error_response(const Status& s) {
  if (s.code() == StatusCode::kNotFound) {
    return error_response(http::status::not_found, s.message(), "model", "model_not_found");
  }
  if (s.code() == StatusCode::kUnavailable) {
    return error_response(http::status::service_unavailable, s.message(), "", "service_unavailable");
  }
  // Engine-side resource_exhausted at submit is about this request's size (KV pool).
  return error_response(http_status_for(s, /*about_size=*/true), s.message());
}

}  // namespace

void GenerationRunner::run(const std::shared_ptr<Exchange>& exchange, GenerationCall call) {
  const int32_t choices = static_cast<int32_t>(call.requests.size());
  const int32_t n = std::max(call.n, 1);
  RequestRecord& record = exchange->record();
  record.adapter = call.requests.front().adapter;
  record.prompt_tokens = 0;  // each prompt once, however many choices it has (vLLM's usage)
  for (size_t first = 0; first < call.requests.size(); first += static_cast<size_t>(n)) {
    record.prompt_tokens += static_cast<int64_t>(call.requests[first].prompt_ids.size());
  }
  const std::shared_ptr<ServingBase> base = call.base;
  auto sink = std::make_shared<StreamSink>(exchange, call.format, call.stream, call.include_usage, choices, n, ledger_,
                                           base);
  {
    std::lock_guard<std::mutex> lock(ledger_->mu);
    if (ledger_->stopping) {
      return exchange->respond(error_response(http::status::service_unavailable, "the server is shutting down", "",
                                              "service_unavailable"));
    }
    if (ledger_->live.size() >= static_cast<size_t>(std::max(0, max_in_flight_))) {
      return exchange->respond(error_response(http::status::too_many_requests,
                                              "too many requests in flight (limit " + std::to_string(max_in_flight_) +
                                                  "); retry later",
                                              "", "rate_limit_exceeded"));
    }
    ledger_->live.emplace(sink.get(), sink);
  }
  // Only the first choice is shadowed: the pair compares one live sequence with its copy.
  if (shadow_ != nullptr) sink->set_shadow(shadow_->offer(*base, call.requests.front(), exchange->record().scenario));
  base->begin_request();
  std::vector<int64_t> ids;
  for (int32_t i = 0; i < choices; ++i) {
    GenerationRequest& request = call.requests[static_cast<size_t>(i)];
    request.sink = sink->choice_sink(i);
    Result<int64_t> id = base->loop().submit(std::move(request));
    if (!id.is_ok()) {
      if (i > 0) return sink->submit_failed(i, submit_error_response(id.status()));
      base->end_request();
      sink->abandon_shadow();
      {
        std::lock_guard<std::mutex> lock(ledger_->mu);
        ledger_->live.erase(sink.get());
      }
      return exchange->respond(submit_error_response(id.status()));
    }
    sink->set_id(i, id.value());
    ids.push_back(id.value());
  }
  exchange->on_client_gone([base, ids = std::move(ids)] {
    for (int64_t id : ids) base->loop().cancel(id);
  });
  if (call.stream) {
    exchange->start_stream(http::status::ok, "text/event-stream");
    for (const nlohmann::json& chunk : call.format->opening()) {
      exchange->send_chunk("data: " + chunk.dump() + "\n\n");
    }
  }
}

void GenerationRunner::begin_stop() {
  std::lock_guard<std::mutex> lock(ledger_->mu);
  ledger_->stopping = true;
}

bool GenerationRunner::stopping() const {
  std::lock_guard<std::mutex> lock(ledger_->mu);
  return ledger_->stopping;
}

void GenerationRunner::cancel_all() {
  std::vector<std::shared_ptr<StreamSink>> sinks;
  {
    std::lock_guard<std::mutex> lock(ledger_->mu);
    for (const auto& [raw, sink] : ledger_->live) sinks.push_back(sink);
  }
  for (const auto& sink : sinks) sink->cancel();
}

bool GenerationRunner::wait_idle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(ledger_->mu);
  return ledger_->idle.wait_until(lock, deadline, [&] { return ledger_->live.empty() && ledger_->releasing == 0; });
}

void GenerationRunner::detach_all() {
  std::lock_guard<std::mutex> lock(ledger_->mu);
  for (const auto& [raw, sink] : ledger_->live) sink->detach();
}

size_t GenerationRunner::in_flight() const {
  std::lock_guard<std::mutex> lock(ledger_->mu);
  return ledger_->live.size();
}

void SinkLedger::release(StreamSink* sink) {
  std::shared_ptr<StreamSink> last;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.find(sink);
    if (it == live.end()) return;
    last = std::move(it->second);
    live.erase(it);
    ++releasing;
  }
  last->base().end_request();
  // Dropping the sink may destroy its exchange and session: done before
  // wait_idle() can return, so stop() never frees the io_context under it.
  last.reset();
  std::lock_guard<std::mutex> lock(mu);
  --releasing;
  if (live.empty() && releasing == 0) idle.notify_all();
}

}  // namespace loragate

#include "gateway/gateway.h"

#include <csignal>
#include <cstdio>

#include <boost/asio/signal_set.hpp>

#include "gateway/metrics/request_log.h"
#include "gateway/openai/openai_chat.h"
#include "gateway/openai/openai_completions.h"
#include "gateway/openai/openai_errors.h"
#include "gateway/openai/openai_models.h"
#include "gateway/openai/openai_tokenize.h"

namespace loragate {

Result<std::unique_ptr<Gateway>> Gateway::create(GatewayOptions options, BaseSet* bases, ModelResolver* resolver) {
  if (bases == nullptr) return Status::invalid_argument("Gateway::create needs a BaseSet");
  if (options.served_model_name.empty()) return Status::invalid_argument("served_model_name must not be empty");
  if (options.server.max_queued_requests <= 0) return Status::invalid_argument("server.max_queued_requests must be > 0");
  if (options.blocking_threads <= 0) return Status::invalid_argument("blocking_threads must be > 0");
  return std::unique_ptr<Gateway>(new Gateway(std::move(options), bases, resolver));
}

Gateway::Gateway(GatewayOptions options, BaseSet* bases, ModelResolver* resolver)
    : options_(std::move(options)),
      runner_(options_.server.max_queued_requests),
      blocking_(options_.blocking_threads, options_.server.max_queued_requests) {
  api_.bases = bases;
  api_.served_model_name = options_.served_model_name;
  api_.resolver = resolver;
  api_.runner = &runner_;
  api_.blocking = &blocking_;
  api_.prompt_limit = &prompt_limit_;
  api_.admin_token = options_.admin_token;
  api_.public_listings = options_.server.public_listings;
  api_.tool_call_parser = options_.server.tool_call_parser;
  api_.started_unix = unix_now();
  add_builtin_routes();
  server_ = std::make_unique<HttpServer>(options_.server, &router_,
                                         [this](const RequestRecord& r) { on_request_done(r); });
}

Gateway::~Gateway() { stop(); }

void Gateway::add_builtin_routes() {
  const ApiContext* api = &api_;
  router_.add(http::verb::post, "/v1/completions", [api](const auto& ex) { handle_completions(*api, ex); });
  router_.add(http::verb::post, "/v1/chat/completions", [api](const auto& ex) { handle_chat_completions(*api, ex); });
  router_.add(http::verb::get, "/v1/models", [api](const auto& ex) { handle_models(*api, ex); });
  // vLLM's tokenizer routes, outside /v1 as in vLLM; a JSON body on GET as on POST.
  for (http::verb verb : {http::verb::post, http::verb::get}) {
    router_.add(verb, "/tokenize", [api](const auto& ex) { handle_tokenize(*api, ex); });
    router_.add(verb, "/detokenize", [api](const auto& ex) { handle_detokenize(*api, ex); });
  }
  router_.add(http::verb::get, "/health", [](const auto& ex) {
    ex->respond(json_response(http::status::ok, {{"status", "ok"}}));
  });
  router_.add(http::verb::get, "/ready", [this](const auto& ex) {
    if (runner_.stopping()) {
      ex->respond(json_response(http::status::service_unavailable, {{"status", "shutting_down"}}));
    } else if (const std::shared_ptr<ServingBase> base = api_.bases->serving(); !base) {
      ex->respond(json_response(http::status::service_unavailable, {{"status", "no_base_serving"}}));
    } else if (const Status health = base->loop().health(); !health.is_ok()) {
      ex->respond(json_response(http::status::service_unavailable,
                                {{"status", "engine_unhealthy"},
                                 {"base", base->name()},
                                 {"error", "the engine of base '" + base->name() + "' is unhealthy: " +
                                               health.message()}}));
    } else {
      ex->respond(json_response(http::status::ok, {{"status", "ready"}}));
    }
  });
}

void Gateway::on_request_done(const RequestRecord& record) {
  if (options_.log_requests) write_request_log(record);
  if (observer_ != nullptr) observer_->on_request_done(record);
}

Result<uint16_t> Gateway::start() {
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (stopped_) return Status::invalid_argument("a stopped Gateway cannot be started again");
  }
  return server_->start();
}

void Gateway::stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (stopped_) return;
  }
  using Clock = std::chrono::steady_clock;
  runner_.begin_stop();
  if (server_->started()) {
    server_->stop_accepting();
    if (!server_->wait_idle(Clock::now() + options_.server.shutdown_deadline)) {
      // Past the deadline: cancel what still generates (clients get 503 or an
      // SSE error event), give them a moment to be told, then cut the rest.
      runner_.cancel_all();
      runner_.wait_idle(Clock::now() + std::chrono::seconds(2));
      if (!server_->wait_idle(Clock::now() + std::chrono::milliseconds(500))) {
        server_->close_all();
        server_->wait_idle(Clock::now() + std::chrono::seconds(1));
      }
    }
    // Jobs still running answer through the network threads: they finish first.
    blocking_.join();
    server_->join();
  }
  // No network thread runs now: sinks the engine still holds must not post.
  runner_.detach_all();
  runner_.cancel_all();
  if (!runner_.wait_idle(Clock::now() + std::chrono::seconds(30))) {
    // Safe to go on: those sinks are owned through the runner's SinkLedger,
    // which they keep alive, and detached above; they end when their engine lets go.
    std::fprintf(stderr, "loragate: gateway stopped with %zu engine requests still live\n", runner_.in_flight());
  }
  std::lock_guard<std::mutex> lock(state_mu_);
  stopped_ = true;
  state_cv_.notify_all();
}

void Gateway::stop_on_signals() {
  auto signals = std::make_shared<boost::asio::signal_set>(server_->io_context(), SIGINT, SIGTERM);
  signals->async_wait([this, signals](const boost::system::error_code& ec, int) {
    if (ec) return;
    std::lock_guard<std::mutex> lock(state_mu_);
    signalled_ = true;
    state_cv_.notify_all();
  });
}

void Gateway::wait() {
  std::unique_lock<std::mutex> lock(state_mu_);
  state_cv_.wait(lock, [&] { return stopped_ || signalled_; });
  if (stopped_) return;
  lock.unlock();
  stop();
}

}  // namespace loragate

// Gateway: the HTTP front of a BaseSet — the OpenAI-compatible routes (each
// request runs on the base generation serving when it arrives), health and
// readiness, the request log and the request observer hook — over an
// HttpServer. `loragate serve` creates one, adds its own routes (admin,
// metrics) through router() and an observer, then start()s it.
//
//   auto gw = Gateway::create(options, &bases, &resolver);
//   gw.value()->router().add(http::verb::get, "/metrics", handler);
//   gw.value()->set_observer(&metrics);
//   uint16_t port = gw.value()->start().value();
//   gw.value()->stop_on_signals();   // SIGINT/SIGTERM make wait() stop gracefully
//   gw.value()->wait();
//
// The BaseSet and the ModelResolver are not owned and must outlive the
// Gateway. Work too slow for a network thread (parsing, rendering and
// tokenising long prompts; the admin routes' disk and registry work) runs on
// blocking_work(), a small pool the Gateway owns. router() and set_observer()
// are for before start(); start(), stop() and wait() may be called from any
// thread (stop() not from a handler).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "bases/base_set.h"
#include "common/status.h"
#include "gateway/admin/blocking_work.h"
#include "gateway/http/http_server.h"
#include "gateway/http/router.h"
#include "gateway/http/server_options.h"
#include "gateway/metrics/request_observer.h"
#include "gateway/model_resolver.h"
#include "gateway/openai/generation_runner.h"
#include "gateway/openai/openai_request.h"
#include "gateway/openai/prompt_size_limit.h"

namespace loragate {

struct GatewayOptions {
  ServerOptions server;                         // listening, limits, timeouts
  std::string served_model_name = "loragate";   // the serving base's name in `model` and /v1/models
  std::string admin_token;                      // lets X-Base address a non-serving base; "" = refused
  bool log_requests = true;                     // one JSON line per request on stderr
  int32_t blocking_threads = 2;                 // threads of blocking_work(); it queues server.max_queued_requests jobs
};

class Gateway {
 public:
  static Result<std::unique_ptr<Gateway>> create(GatewayOptions options, BaseSet* bases, ModelResolver* resolver);
  ~Gateway();  // stop()
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Routes: the built-in ones are registered; add more before start().
  Router& router() { return router_; }
  // Live requests are also offered to `shadow` (not owned; null = none). Before start().
  void set_shadow_traffic(ShadowTraffic* shadow) { runner_.set_shadow_traffic(shadow); }
  // Called once per finished request; not owned; null = none. Before start().
  void set_observer(RequestObserver* observer) { observer_ = observer; }
  // Where routes run what must not block a network thread (see blocking_work.h).
  BlockingWork& blocking_work() { return blocking_; }

  // Binds and serves; returns the bound port.
  Result<uint16_t> start();
  // Graceful: /ready turns 503 and new generations get 503, new connections
  // are refused, in-flight requests finish until shutdown_deadline, then
  // what is left is cancelled and closed. Idempotent.
  void stop();
  // Makes SIGINT/SIGTERM wake wait(), which then stops. After start().
  void stop_on_signals();
  // Blocks until stop() has finished (or, after stop_on_signals, a signal came and it stopped).
  void wait();

  bool ready() const {
    const std::shared_ptr<ServingBase> base = api_.bases->serving();
    return server_ && server_->started() && !runner_.stopping() && base && base->loop().health().is_ok();
  }
  const ApiContext& api() const { return api_; }
  size_t in_flight() const { return runner_.in_flight(); }

 private:
  Gateway(GatewayOptions options, BaseSet* bases, ModelResolver* resolver);
  void add_builtin_routes();
  void on_request_done(const RequestRecord& record);

  const GatewayOptions options_;
  Router router_;
  GenerationRunner runner_;
  BlockingWork blocking_;               // joined in stop(), before the network threads
  PromptSizeLimit prompt_limit_;
  ApiContext api_;
  RequestObserver* observer_ = nullptr;
  std::unique_ptr<HttpServer> server_;  // destroyed first: its pending handlers reference the rest

  std::mutex stop_mu_;                  // serialises stop()
  std::mutex state_mu_;
  std::condition_variable state_cv_;
  bool stopped_ = false;                // guarded by state_mu_
  bool signalled_ = false;              // guarded by state_mu_
};

}  // namespace loragate

// AdminGate: what every admin route goes through. guard() wraps a handler so
// that it runs only for a request bearing the admin token (401/403
// otherwise); the handler reads its request on the strand, then hands what
// touches the disk or the registry to off_strand(), which computes it on the
// Gateway's BlockingWork and answers on the exchange's strand.
//
// A plain value (the token and a pointer to the pool, which must outlive
// every request): routes capture it by copy. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "gateway/admin/admin_auth.h"
#include "gateway/admin/blocking_work.h"
#include "gateway/http/router.h"

namespace loragate {

class AdminGate {
 public:
  AdminGate(std::string token, BlockingWork* blocking) : token_(std::move(token)), blocking_(blocking) {}

  // `handler`, behind the token check.
  template <typename Handler>
  RouteHandler guard(Handler handler) const {
    return [token = token_, handler = std::move(handler)](const std::shared_ptr<Exchange>& ex) {
      if (auto denied = check_admin_token(ex->request(), token)) return ex->respond(denied->to_response());
      handler(ex);
    };
  }

  // Runs `work()` on the BlockingWork, then `then(result)` on the strand.
  template <typename Work, typename Then>
  void off_strand(const std::shared_ptr<Exchange>& ex, Work work, Then then) const {
    run_off_strand(*blocking_, ex, std::move(work), std::move(then));
  }
  // Answers `ex` with the response `work()` computes on the BlockingWork.
  template <typename Work>
  void answer_off_strand(const std::shared_ptr<Exchange>& ex, Work work) const {
    off_strand(ex, std::move(work), [ex](HttpResponse response) { ex->respond(std::move(response)); });
  }

 private:
  std::string token_;
  BlockingWork* blocking_;
};

}  // namespace loragate

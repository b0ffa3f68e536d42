#include "gateway/metrics/metrics_route.h"

namespace loragate {

void handle_metrics(const Metrics& metrics, const ListingAccess& access, const std::shared_ptr<Exchange>& exchange) {
  if (std::optional<ApiError> denied = check_listing_access(access, exchange->request())) {
    return exchange->respond(denied->to_response());
  }
  HttpResponse r{http::status::ok, 11};
  r.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  r.body() = metrics.render();
  exchange->respond(std::move(r));
}

}  // namespace loragate

// GET /metrics: the Prometheus exposition of a Metrics, behind the admin
// token when server.public_listings is false (it names every adapter).
// A Prometheus scrape job then sends the token:
//   authorization: {type: Bearer, credentials_file: /etc/loragate/admin-token}
#pragma once

#include <memory>

#include "gateway/admin/listing_access.h"
#include "gateway/http/http_exchange.h"
#include "gateway/metrics/metrics.h"

namespace loragate {

void handle_metrics(const Metrics& metrics, const ListingAccess& access, const std::shared_ptr<Exchange>& exchange);

}  // namespace loragate

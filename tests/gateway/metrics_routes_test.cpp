// loragate_requests_total and its histograms count generation requests only:
// an adapter loaded through vLLM's /v1/load_lora_adapter, or a model
// listing, is no request of a tenant's adapter.
#include <gtest/gtest.h>

#include "gateway/metrics/metrics.h"

namespace loragate {
namespace {

TEST(MetricsRoutesTest, OnlyGenerationRoutesAreCounted) {
  Metrics metrics(nullptr);
  const auto finish = [&](const char* route) {
    RequestRecord r;
    r.route = route;
    r.base = "b";
    r.status = 200;
    metrics.on_request_done(r);
  };
  for (const char* route : {"/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/v1/models", "/tokenize", ""}) {
    finish(route);
  }
  EXPECT_EQ(metrics.requests_for("b", ""), 0u);
  for (const char* route : {"/v1/completions", "/v1/chat/completions"}) finish(route);
  EXPECT_EQ(metrics.requests_for("b", ""), 2u);
}

}  // namespace
}  // namespace loragate

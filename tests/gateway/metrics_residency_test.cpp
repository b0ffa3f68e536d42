// The per-adapter residency gauges of GET /metrics (gateway/metrics/metrics.cpp):
// vllm:lora_adapter_loaded lists exactly the adapters a base holds in host
// memory or a slot — none before any request, then each one a request or a
// validation loaded — and vllm:lora_max_adapters its slot count.
#include <string>

#include "gateway/metrics/metrics.h"
#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

// Its own suite: a fresh BaseSet, so no other test has loaded an adapter yet.
class MetricsResidencyTest : public GatewayTest {};

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

std::string loaded_line(const std::string& adapter) {
  return "vllm:lora_adapter_loaded{adapter_name=\"" + adapter + "\",base=\"" + kServed + "\"} 1";
}

TEST_F(MetricsResidencyTest, LoadedAdaptersAndCapacityAreGauges) {
  Metrics metrics(bases_);
  std::string text = metrics.render();
  EXPECT_TRUE(has_line(text, "# TYPE vllm:lora_adapter_loaded gauge")) << text;
  EXPECT_TRUE(has_line(text, std::string("vllm:lora_max_adapters{base=\"") + kServed + "\"} 4")) << text;
  for (const char* name : {"a", "b", "c"}) EXPECT_FALSE(has_line(text, loaded_line(name))) << name;

  // A request loads its adapter; a validation (load_now) loads another.
  ClientResponse r = post("/v1/completions", greedy("b", 4));
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  ASSERT_TRUE(bases_->serving()->adapters()->load_now("a").is_ok());
  text = metrics.render();
  EXPECT_TRUE(has_line(text, loaded_line("a"))) << text;
  EXPECT_TRUE(has_line(text, loaded_line("b"))) << text;
  EXPECT_FALSE(has_line(text, loaded_line("c"))) << "c was never requested";
}

}  // namespace
}  // namespace loragate::testing

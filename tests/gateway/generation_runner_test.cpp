// GenerationRunner's ownership of its sinks: a runner destroyed while the
// engine still runs one of its requests (Gateway::stop past its bounded
// waits) must leave the sink alive until the engine lets go of it.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "bases/serving_base.h"
#include "gateway/openai/generation_runner.h"
#include "tests/gateway/synth_fixtures.h"
#include "tests/test_util.h"

namespace loragate {
namespace runner_test {

class NullFormat final : public ResponseFormat {
 public:
  nlohmann::json full(const std::vector<GenerationResult>&) const override { return {}; }
  std::vector<nlohmann::json> delta(int32_t, std::string_view) override { return {}; }
  std::vector<nlohmann::json> finish(int32_t, std::string_view, std::string_view) override { return {}; }
  nlohmann::json usage(const std::vector<GenerationResult>&) const override { return {}; }
};

class QuietExchange final : public Exchange {
 public:
  QuietExchange() : Exchange(HttpRequest{http::verb::post, "/v1/completions", 11}, {}) {}
  void post(std::function<void()> fn) override { fn(); }
  void respond(HttpResponse) override {}
  void start_stream(http::status, std::string_view) override {}
  void send_chunk(std::string) override {}
  void end_stream() override {}
  bool client_gone() const override { return false; }
  void on_client_gone(std::function<void()>) override {}
};

// Issue 19: the runner's map owned every sink, so destroying the runner freed
// sinks the engine still called (and each called back into the freed runner).
TEST(GenerationRunner, ASinkOutlivesItsRunnerUntilTheEngineFinishesIt) {
  EngineOptions options;
  options.kv_cache_bytes = 8ll << 20;
  options.max_loras = 1;
  auto base = ServingBase::load({"online", testing::gateway_fixture_dir() + "/models/stories260K", WeightType::kF32}, options,
                                nullptr, /*serving=*/true);
  ASSERT_TRUE(base.is_ok()) << base.status().to_string();

  auto runner = std::make_unique<GenerationRunner>(4);
  GenerationCall call;
  call.base = *base;
  GenerationRequest& request = call.requests.emplace_back();
  request.prompt_ids = {1, 400, 401, 402};
  request.params.max_tokens = 400;  // hundreds of steps: still running when the runner goes
  request.params.ignore_eos = true;
  request.params.temperature = 0;
  call.format = std::make_shared<NullFormat>();
  runner->run(std::make_shared<QuietExchange>(), std::move(call));
  ASSERT_EQ((*base)->in_flight(), 1);
  // What Gateway::stop does when its waits ran out, then the Gateway goes.
  runner->begin_stop();
  runner->detach_all();
  runner.reset();

  // The engine finishes the request on a live sink, which ends it on its base.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((*base)->in_flight() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ((*base)->in_flight(), 0);
}

}  // namespace runner_test
}  // namespace loragate

// The prefix cache over real loopback HTTP (issue 23): the `cache_salt` body
// field (validated, passed on, never echoed nor logged),
// usage.prompt_tokens_details.cached_tokens in every usage the routes write,
// the prefix-cache metric families, and POST /admin/prefix_cache/reset (token,
// unknown base, the bases it reset).
//
// PrefixCacheGatewayTest.PrefixCacheHitsThroughGateway checks the cache itself
// end to end (a repeated prompt is served from it, other salts and adapters
// are not, a reset forgets it): it needs the engine's prefix cache
// (engine/prefix_cache.*), the other tests only the gateway.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/metrics/metrics.h"
#include "gateway/metrics/request_log.h"
#include "tests/gateway/admin_fixture.h"
#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

// Long enough for several full KV blocks of 16 tokens.
constexpr const char* kPrefixCachePrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine with her "
    "big red ball. One day, she saw a small bird sitting on a branch of the old tree near her house. The bird "
    "was sad because it could not fly. Lily wanted to help the bird, so she went to ask her mom what to do.";

json salted_chat_body(const std::string& content, int max_tokens) {
  return {{"messages", json::array({{{"role", "user"}, {"content", content}}})},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// The value of the sample `series` (name and labels) in a Prometheus text, or -1 when absent.
double prefix_cache_sample(const std::string& text, const std::string& series) {
  const std::string needle = "\n" + series + " ";
  const size_t at = text.find(needle);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + needle.size()));
}

bool has_prefix_cache_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

class PrefixCacheGatewayTest : public AdminGatewayTest {
 protected:
  ClientResponse complete(const std::string& prompt, const json& extra = json::object()) {
    json body = {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}};
    body.update(extra);
    return post_json(port_, "/v1/completions", body);
  }

  // usage.prompt_tokens_details.cached_tokens of a 200 response; -1 (and a failure) otherwise.
  static int64_t cached_tokens(const ClientResponse& r) {
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    const json j = r.json();
    if (r.status != 200 || !j.contains("usage")) return -1;
    const json& details = j["usage"]["prompt_tokens_details"];
    EXPECT_TRUE(details.is_object()) << r.body;
    if (!details.is_object() || !details.contains("cached_tokens")) return -1;
    return details["cached_tokens"].get<int64_t>();
  }

  static std::string text_of(const ClientResponse& r) {
    const json j = r.json();
    if (!j.contains("choices") || j["choices"].empty()) return "<no choice>";
    const json& choice = j["choices"][0];
    return choice.contains("text") ? choice["text"].get<std::string>()
                                   : choice["message"]["content"].get<std::string>();
  }

  // The usage chunk of a streamed completion (stream_options.include_usage).
  json streamed_usage(const std::string& prompt) {
    ClientResponse r = complete(prompt, {{"stream", true}, {"stream_options", {{"include_usage", true}}}});
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    json usage;
    for (const std::string& event : sse_events(r.body)) {
      if (event == "[DONE]") continue;
      const json chunk = json::parse(event, nullptr, false);
      if (chunk.is_object() && chunk.contains("usage") && chunk["usage"].is_object()) usage = chunk["usage"];
    }
    EXPECT_TRUE(usage.is_object()) << "no usage chunk in " << r.body;
    return usage;
  }

  int32_t block_size() const { return bases_->serving()->loop().options().kv_block_size; }
};

TEST_F(PrefixCacheGatewayTest, CacheSaltIsValidatedByNameAndNeverEchoed) {
  const std::string marker = "SALT-SECRET-";
  std::string too_long;
  while (too_long.size() <= kMaxCacheSaltBytes) too_long += marker;
  const std::vector<json> bad = {"", 42, true, json::array({"a"}), json::object({{"a", 1}}), too_long};
  for (const char* route : {"/v1/completions", "/v1/chat/completions"}) {
    const bool chat = std::string(route) == "/v1/chat/completions";
    auto body_with = [&](const json& salt) {
      json body = chat ? salted_chat_body("Hello there", 2) : json{{"prompt", "Once upon a time"}, {"max_tokens", 2}};
      body["cache_salt"] = salt;
      return body;
    };
    for (const json& salt : bad) {
      ClientResponse r = post_json(port_, route, body_with(salt));
      ASSERT_EQ(r.status, 400) << route << " " << salt.dump().substr(0, 40) << ": " << r.body;
      const json error = r.json()["error"];
      EXPECT_EQ(error["param"], "cache_salt") << r.body;
      EXPECT_NE(error["message"].get<std::string>().find("cache_salt"), std::string::npos) << r.body;
      EXPECT_EQ(r.body.find(marker), std::string::npos) << "the salt was echoed: " << r.body;
    }
    // Absent, null, one byte and the longest accepted are fine, and never echoed.
    const std::string longest(kMaxCacheSaltBytes, 'k');
    for (const json& salt : {json(nullptr), json("z"), json(longest), json(marker + "tenant-1")}) {
      ClientResponse r = post_json(port_, route, body_with(salt));
      EXPECT_EQ(r.status, 200) << route << " " << salt.dump().substr(0, 40) << ": " << r.body;
      EXPECT_EQ(r.body.find(marker), std::string::npos) << "the salt was echoed: " << r.body;
      EXPECT_EQ(r.body.find(longest), std::string::npos) << "the salt was echoed: " << r.body;
    }
  }
}

TEST_F(PrefixCacheGatewayTest, UsageHasPromptTokensDetails) {
  ClientResponse r = complete("Once upon a time");
  ASSERT_EQ(r.status, 200) << r.body;
  json usage = r.json()["usage"];
  ASSERT_TRUE(usage["prompt_tokens_details"].is_object()) << r.body;
  ASSERT_TRUE(usage["prompt_tokens_details"]["cached_tokens"].is_number_integer()) << r.body;
  // A fresh base has nothing cached yet.
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 0) << r.body;
  EXPECT_GT(usage["prompt_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(usage["completion_tokens"], 8);
  EXPECT_EQ(usage["total_tokens"].get<int64_t>(), usage["prompt_tokens"].get<int64_t>() + 8);

  ClientResponse c = post_json(port_, "/v1/chat/completions", salted_chat_body("Tell me a story", 4));
  ASSERT_EQ(c.status, 200) << c.body;
  usage = c.json()["usage"];
  ASSERT_TRUE(usage["prompt_tokens_details"]["cached_tokens"].is_number_integer()) << c.body;
  EXPECT_GE(usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_LT(usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), usage["prompt_tokens"].get<int64_t>());

  usage = streamed_usage("A streamed story");
  ASSERT_TRUE(usage["prompt_tokens_details"]["cached_tokens"].is_number_integer()) << usage.dump();
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 0) << usage.dump();
  EXPECT_EQ(usage["total_tokens"].get<int64_t>(),
            usage["prompt_tokens"].get<int64_t>() + usage["completion_tokens"].get<int64_t>());
}

TEST_F(PrefixCacheGatewayTest, MetricsHavePrefixCacheFamilies) {
  ASSERT_EQ(complete(kPrefixCachePrompt).status, 200);
  ASSERT_EQ(complete(kPrefixCachePrompt).status, 200);
  Metrics metrics(bases_.get());
  const std::string text = metrics.render();
  for (const char* line : {"# TYPE loragate_prefix_cache_queries_total counter",
                           "# TYPE loragate_prefix_cache_hits_total counter", "# TYPE loragate_prefix_cache_blocks gauge",
                           "# TYPE vllm:prefix_cache_queries counter", "# TYPE vllm:prefix_cache_hits counter"}) {
    EXPECT_TRUE(has_prefix_cache_line(text, line)) << line << "\n" << text;
  }
  // The samples are the engine's counters (nothing runs now: they stay put).
  const EngineStats s = bases_->serving()->loop().stats();
  EXPECT_EQ(prefix_cache_sample(text, "loragate_prefix_cache_queries_total{base=\"stories\"}"),
            static_cast<double>(s.prefix_cache_queries));
  EXPECT_EQ(prefix_cache_sample(text, "loragate_prefix_cache_hits_total{base=\"stories\"}"),
            static_cast<double>(s.prefix_cache_hits));
  EXPECT_EQ(prefix_cache_sample(text, "loragate_prefix_cache_blocks{base=\"stories\"}"),
            static_cast<double>(s.prefix_cache_blocks));
  EXPECT_EQ(prefix_cache_sample(text, "vllm:prefix_cache_queries"), static_cast<double>(s.prefix_cache_queries));
  EXPECT_EQ(prefix_cache_sample(text, "vllm:prefix_cache_hits"), static_cast<double>(s.prefix_cache_hits));
  EXPECT_LE(s.prefix_cache_hits, s.prefix_cache_queries);
}

TEST_F(PrefixCacheGatewayTest, ResetNeedsTheTokenAndNamesTheBasesItReset) {
  const std::string route = "/admin/prefix_cache/reset";
  EXPECT_EQ(http_call(port_, http::verb::post, route).status, 401);
  EXPECT_EQ(http_call(port_, http::verb::post, route, "", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(admin(http::verb::get, route).status, 405);

  ClientResponse r = admin(http::verb::post, route);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json(), json({{"reset", json::array({"stories"})}})) << r.body;

  ClientResponse unknown = admin(http::verb::post, route + "?base=nope");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.body.find("nope"), std::string::npos) << unknown.body;
  EXPECT_EQ(admin(http::verb::post, route, {{"base", "nope"}}).status, 404);
  EXPECT_EQ(admin(http::verb::post, route, {{"base", 7}}).status, 400);
  EXPECT_EQ(http_call(port_, http::verb::post, route, "{not json",
                      {{"Authorization", std::string("Bearer ") + kAdminToken}})
                .status,
            400);

  // A candidate loaded beside the serving base is reset too, unless one is named.
  ASSERT_EQ(admin(http::verb::post, "/admin/bases", {{"name", "v2"}, {"path", model_dir()}}).status, 202);
  ASSERT_TRUE(wait_for_base("v2", "candidate", std::chrono::seconds(30)));
  r = admin(http::verb::post, route);
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> names = r.json()["reset"];
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"stories", "v2"})) << r.body;
  r = admin(http::verb::post, route + "?base=v2");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json(), json({{"reset", json::array({"v2"})}})) << r.body;
  r = admin(http::verb::post, route, {{"base", "stories"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json(), json({{"reset", json::array({"stories"})}})) << r.body;
}

// Needs the engine's prefix cache (engine/prefix_cache.*): with only the
// engine API in place, cached_tokens stays 0 and the hit checks fail.
TEST_F(PrefixCacheGatewayTest, PrefixCacheHitsThroughGateway) {
  const int32_t block = block_size();
  ClientResponse first = complete(kPrefixCachePrompt);
  ASSERT_EQ(first.status, 200) << first.body;
  const int64_t prompt_tokens = first.json()["usage"]["prompt_tokens"];
  ASSERT_GE(prompt_tokens, 3 * block) << "the prompt must span several full KV blocks";
  EXPECT_EQ(cached_tokens(first), 0) << "a fresh base has nothing cached";

  // The same prompt again: its full blocks come from the cache, and the text is the same.
  ClientResponse again = complete(kPrefixCachePrompt);
  const int64_t hit = cached_tokens(again);
  EXPECT_GT(hit, 0) << again.body;
  EXPECT_LT(hit, prompt_tokens) << "at least the last prompt token is computed";
  EXPECT_EQ(hit % block, 0) << "only full blocks are cached";
  EXPECT_EQ(text_of(again), text_of(first));

  // Another tenant's salt shares nothing with the unsalted prompt; its own salt shares with itself.
  ClientResponse salted = complete(kPrefixCachePrompt, {{"cache_salt", "tenant-b"}});
  EXPECT_EQ(cached_tokens(salted), 0) << salted.body;
  EXPECT_EQ(text_of(salted), text_of(first)) << "a salt never changes the output";
  ClientResponse salted_again = complete(kPrefixCachePrompt, {{"cache_salt", "tenant-b"}});
  EXPECT_GT(cached_tokens(salted_again), 0) << salted_again.body;
  ClientResponse other_salt = complete(kPrefixCachePrompt, {{"cache_salt", "tenant-c"}});
  EXPECT_EQ(cached_tokens(other_salt), 0) << other_salt.body;

  // An adapter changes K/V: the base's blocks are not its.
  ASSERT_EQ(admin(http::verb::post, "/admin/adapters", {{"name", "a"}, {"path", lora_dir("a")}}).status, 201);
  ClientResponse adapted = complete(kPrefixCachePrompt, {{"model", "a"}});
  EXPECT_EQ(cached_tokens(adapted), 0) << adapted.body;
  EXPECT_GT(cached_tokens(complete(kPrefixCachePrompt, {{"model", "a"}})), 0);

  // The streamed usage chunk says so too, and so does chat.
  json usage = streamed_usage(kPrefixCachePrompt);
  EXPECT_GT(usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0) << usage.dump();
  ASSERT_EQ(post_json(port_, "/v1/chat/completions", salted_chat_body(kPrefixCachePrompt, 4)).status, 200);
  EXPECT_GT(cached_tokens(post_json(port_, "/v1/chat/completions", salted_chat_body(kPrefixCachePrompt, 4))), 0);

  // The counters saw the hits; the gauge holds the cached blocks.
  Metrics metrics(bases_.get());
  const std::string text = metrics.render();
  EXPECT_GT(prefix_cache_sample(text, "vllm:prefix_cache_hits"), 0) << text;
  EXPECT_GE(prefix_cache_sample(text, "vllm:prefix_cache_queries"), prefix_cache_sample(text, "vllm:prefix_cache_hits"));
  EXPECT_GT(prefix_cache_sample(text, "loragate_prefix_cache_hits_total{base=\"stories\"}"), 0) << text;
  EXPECT_GT(prefix_cache_sample(text, "loragate_prefix_cache_blocks{base=\"stories\"}"), 0) << text;

  // After a reset nothing is found: the next request runs cold, with the same text.
  ClientResponse reset = admin(http::verb::post, "/admin/prefix_cache/reset");
  ASSERT_EQ(reset.status, 200) << reset.body;
  ClientResponse cold = complete(kPrefixCachePrompt);
  EXPECT_EQ(cached_tokens(cold), 0) << cold.body;
  EXPECT_EQ(text_of(cold), text_of(first));
  EXPECT_EQ(cached_tokens(complete(kPrefixCachePrompt, {{"cache_salt", "tenant-b"}})), 0) << "every salt is reset";
}

// Records what the gateway reports of each request.
class SaltRecordingObserver final : public RequestObserver {
 public:
  void on_request_done(const RequestRecord& record) override {
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(record);
  }
  std::vector<RequestRecord> records() const {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<RequestRecord> records_;
};

class PrefixCacheSaltLogTest : public GatewayTest {};

TEST_F(PrefixCacheSaltLogTest, TheSaltIsNeverInTheRequestLog) {
  SaltRecordingObserver seen;
  observer_ = &seen;
  ServerOptions server;
  server.port = 0;
  start(server);
  const std::string salt = "tenant-secret-5c1f";
  json body = greedy(kServed, 2);
  body["cache_salt"] = salt;
  ASSERT_EQ(post("/v1/completions", body).status, 200);
  json chat = salted_chat_body("Hello", 2);
  chat["cache_salt"] = salt;
  ASSERT_EQ(post("/v1/chat/completions", chat).status, 200);
  body["cache_salt"] = salt + std::string(kMaxCacheSaltBytes, 'x');  // refused: too long
  ASSERT_EQ(post("/v1/completions", body).status, 400);
  gateway_.reset();  // every record is reported by now
  const std::vector<RequestRecord> records = seen.records();
  ASSERT_GE(records.size(), 3u);
  for (const RequestRecord& r : records) {
    const std::string line = format_request_log(r);
    EXPECT_NE(line.find("/v1/"), std::string::npos) << line;
    EXPECT_EQ(line.find(salt), std::string::npos) << "the salt was logged: " << line;
  }
}

}  // namespace
}  // namespace loragate::testing

// The gateway's pieces without a network or a model: body parsing, field
// validation, the Status -> HTTP map, model/scenario resolution, and routing
// (with a fake Exchange).
#include <gtest/gtest.h>

#include "gateway/http/router.h"
#include "gateway/model_resolver.h"
#include "gateway/openai/openai_errors.h"
#include "gateway/openai/request_fields.h"

namespace loragate {
namespace {

using nlohmann::json;

class FakeExchange : public Exchange {
 public:
  FakeExchange(http::verb method, const std::string& target) : Exchange(HttpRequest{method, target, 11}, {}) {}
  void post(std::function<void()> fn) override { fn(); }
  void respond(HttpResponse response) override { responses.push_back(std::move(response)); }
  void start_stream(http::status, std::string_view) override {}
  void send_chunk(std::string) override {}
  void end_stream() override {}
  bool client_gone() const override { return false; }
  void on_client_gone(std::function<void()>) override {}
  std::vector<HttpResponse> responses;
};

TEST(RequestFields, JsonErrorsSayWhere) {
  json body;
  auto err = parse_json_object("{\"a\": 1,\n \"b\": }", &body);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->status, http::status::bad_request);
  EXPECT_NE(err->message.find("line 2"), std::string::npos) << err->message;
  EXPECT_EQ(err->message.find("[json.exception"), std::string::npos) << err->message;
  EXPECT_TRUE(parse_json_object("\"text\"", &body).has_value());
  EXPECT_FALSE(parse_json_object("{}", &body).has_value());
}

TEST(RequestFields, CommonFieldsAndDefaults) {
  CommonFields f;
  ASSERT_FALSE(read_common_fields(json::object(), false, &f).has_value());
  EXPECT_EQ(f.params.max_tokens, -1);  // the route picks the default
  EXPECT_FLOAT_EQ(f.params.temperature, 1.0f);
  EXPECT_FALSE(f.stream);

  CommonFields g;
  json body = {{"max_tokens", 7}, {"temperature", 0.5}, {"top_p", 0.9}, {"top_k", -1}, {"seed", 42},
               {"stop", {"\n", "END"}}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
               {"model", "a"}, {"scenario", "s"}, {"n", 1}, {"presence_penalty", 0}};
  ASSERT_FALSE(read_common_fields(body, false, &g).has_value());
  EXPECT_EQ(g.params.max_tokens, 7);
  EXPECT_EQ(g.params.top_k, 0);
  EXPECT_EQ(*g.params.seed, 42u);
  EXPECT_EQ(g.params.stop.size(), 2u);
  EXPECT_TRUE(g.stream && g.include_usage);
  EXPECT_EQ(g.model, "a");
  EXPECT_EQ(g.scenario, "s");

  CommonFields h;
  auto err = read_common_fields({{"max_completion_tokens", -3}}, true, &h);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "max_completion_tokens");
  err = read_common_fields({{"max_tokens", true}}, false, &h);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->message, "max_tokens must be a non-negative integer");
}

TEST(OpenAiErrors, ShapeAndStatusMap) {
  HttpResponse r = error_response(http::status::bad_request, "bad", "max_tokens");
  json j = json::parse(r.body());
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(r[http::field::content_type], "application/json");
  EXPECT_EQ(http_status_for(Status::invalid_argument("x")), http::status::bad_request);
  EXPECT_EQ(http_status_for(Status::unsupported("x")), http::status::bad_request);
  EXPECT_EQ(http_status_for(Status::not_found("x")), http::status::not_found);
  EXPECT_EQ(http_status_for(Status::resource_exhausted("x")), http::status::too_many_requests);
  EXPECT_EQ(http_status_for(Status::resource_exhausted("x"), true), http::status::payload_too_large);
  EXPECT_EQ(http_status_for(Status::internal("x")), http::status::internal_server_error);
  EXPECT_EQ(http_status_for(Status::already_exists("x")), http::status::conflict);
  EXPECT_EQ(http_status_for(Status::failed_precondition("x")), http::status::conflict);
  EXPECT_EQ(http_status_for(Status::unavailable("x")), http::status::service_unavailable);
  EXPECT_EQ(http_status_for(Status::cancelled("x")), http::status::service_unavailable);
  EXPECT_EQ(http_status_for(StatusCode::kIoError), http::status::internal_server_error);
  EXPECT_EQ(json::parse(error_response(http::status::too_many_requests, "slow").body())["error"]["type"],
            "rate_limit_error");
}

// A memory budget refusal is not transient: 507 with its own type, and no
// Retry-After that would tell clients to come back in a second.
TEST(OpenAiErrors, AMemoryBudgetRefusalIs507WithoutRetryAfter) {
  const Status refused = Status::insufficient_memory("base 'b' needs 300 MiB but 500 MiB of the 600 MiB budget are in use");
  HttpResponse r = error_response(http_status_for(refused), refused.message());
  EXPECT_EQ(r.result(), http::status::insufficient_storage);
  EXPECT_EQ(json::parse(r.body())["error"]["type"], "insufficient_memory");
  EXPECT_EQ(r.count(http::field::retry_after), 0u);
  EXPECT_EQ(error_response(http::status::too_many_requests, "slow")[http::field::retry_after], "1");
}

TEST(ModelResolver, ModelAndScenario) {
  InMemoryModelResolver resolver;
  resolver.set("s", "");
  ModelChoice c;
  EXPECT_FALSE(resolve_model("", "", "base", "gen1", &resolver, nullptr, &c).has_value());
  EXPECT_EQ(c.adapter, "");
  EXPECT_FALSE(resolve_model("base", "s", "base", "gen1", &resolver, nullptr, &c).has_value());
  EXPECT_EQ(c.scenario, "s");
  EXPECT_FALSE(resolve_model("gen1", "", "base", "gen1", &resolver, nullptr, &c).has_value()) << "the base's own name";
  auto err = resolve_model("x", "", "base", "gen1", &resolver, nullptr, &c);  // no adapters at all
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->status, http::status::not_found);
  EXPECT_EQ(err->param, "model");
  err = resolve_model("", "t", "base", "gen1", &resolver, nullptr, &c);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->param, "scenario");
  EXPECT_TRUE(resolver.remove("s"));
  EXPECT_FALSE(resolver.remove("s"));
}

TEST(Router, ExactPrefixNotFoundAndMethodNotAllowed) {
  Router router;
  std::vector<std::string> hits;
  router.add(http::verb::get, "/v1/models", [&](const auto&) { hits.push_back("models"); });
  router.add_prefix(http::verb::get, "/admin/", [&](const auto&) { hits.push_back("admin"); });
  router.add_prefix(http::verb::get, "/admin/adapters/", [&](const auto&) { hits.push_back("adapters"); });
  router.add(http::verb::post, "/admin/adapters/", [&](const auto&) { hits.push_back("exact"); });

  auto run = [&](http::verb m, const std::string& target) {
    auto ex = std::make_shared<FakeExchange>(m, target);
    router.dispatch(ex);
    return ex;
  };
  run(http::verb::get, "/v1/models?x=1");
  run(http::verb::get, "/admin/stats");
  run(http::verb::get, "/admin/adapters/a");
  run(http::verb::post, "/admin/adapters/");
  run(http::verb::get, "/admin/adapters/");  // the exact route is POST only: the GET prefix serves
  EXPECT_EQ(hits, (std::vector<std::string>{"models", "admin", "adapters", "exact", "adapters"}));

  auto missing = run(http::verb::get, "/v1/nothing");
  ASSERT_EQ(missing->responses.size(), 1u);
  EXPECT_EQ(missing->responses[0].result(), http::status::not_found);
  auto wrong = run(http::verb::post, "/v1/models");
  ASSERT_EQ(wrong->responses.size(), 1u);
  EXPECT_EQ(wrong->responses[0].result(), http::status::method_not_allowed);
  EXPECT_EQ(wrong->responses[0][http::field::allow], "GET");
  auto put = run(http::verb::put, "/admin/adapters/x");
  ASSERT_EQ(put->responses.size(), 1u);
  EXPECT_EQ(put->responses[0][http::field::allow], "GET");
}

}  // namespace
}  // namespace loragate

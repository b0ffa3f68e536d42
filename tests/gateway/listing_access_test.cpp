// server.public_listings: true (the default) lists the adapters in
// /v1/models and serves /metrics to anyone; false shows a caller without the
// admin token only the base in /v1/models and answers /metrics with 401.
#include "gateway/metrics/metrics.h"
#include "gateway/metrics/metrics_route.h"
#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

constexpr const char* kToken = "s3cret";

class ListingAccessTest : public GatewayTest {
 protected:
  // A gateway with /metrics routed as `loragate serve` routes it.
  void start_listing(bool public_listings, const std::string& admin_token = kToken) {
    gateway_.reset();
    GatewayOptions options;
    options.server.port = 0;
    options.server.public_listings = public_listings;
    options.served_model_name = kServed;
    options.admin_token = admin_token;
    options.log_requests = false;
    auto gw = Gateway::create(options, bases_, &resolver_);
    ASSERT_TRUE(gw.is_ok()) << gw.status().to_string();
    gateway_ = std::move(gw).value();
    const ListingAccess access{public_listings, admin_token};
    gateway_->router().add(http::verb::get, "/metrics", [this, access](const std::shared_ptr<Exchange>& ex) {
      handle_metrics(metrics_, access, ex);
    });
    gateway_->set_observer(&metrics_);
    port_ = gateway_->start().value();
  }
  void TearDown() override { gateway_.reset(); }

  std::vector<std::string> model_ids(const std::map<std::string, std::string>& headers = {}) {
    ClientResponse r = http_call(port_, http::verb::get, "/v1/models", "", headers);
    EXPECT_EQ(r.status, 200) << r.error;
    const json listed = r.json();
    std::vector<std::string> ids;
    for (const json& m : listed["data"]) ids.push_back(m["id"]);
    return ids;
  }

  Metrics metrics_{nullptr};
};

const std::map<std::string, std::string> kAdmin = {{"Authorization", std::string("Bearer ") + kToken}};
const std::vector<std::string> kAll = {kServed, "a", "b", "c"};

TEST_F(ListingAccessTest, PublicByDefault) {
  EXPECT_TRUE(ServerOptions{}.public_listings);
  start_listing(/*public_listings=*/true);
  EXPECT_EQ(model_ids(), kAll);
  EXPECT_EQ(model_ids(kAdmin), kAll);
  ClientResponse m = http_call(port_, http::verb::get, "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("loragate_requests_total"), std::string::npos);
}

TEST_F(ListingAccessTest, PrivateListingsNeedTheAdminToken) {
  start_listing(/*public_listings=*/false);
  EXPECT_EQ(model_ids(), std::vector<std::string>{kServed});
  EXPECT_EQ(model_ids({{"Authorization", "Bearer wrong"}}), std::vector<std::string>{kServed});
  EXPECT_EQ(model_ids(kAdmin), kAll);

  ClientResponse denied = http_call(port_, http::verb::get, "/metrics");
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.json()["error"]["type"], "authentication_error") << denied.body;
  EXPECT_NE(denied.body.find("public_listings"), std::string::npos) << denied.body;
  EXPECT_EQ(http_call(port_, http::verb::get, "/metrics", "", {{"Authorization", "Bearer wrong"}}).status, 401);
  ClientResponse allowed = http_call(port_, http::verb::get, "/metrics", "", kAdmin);
  EXPECT_EQ(allowed.status, 200);
  EXPECT_NE(allowed.body.find("loragate_requests_total"), std::string::npos);

  // Generation is not a listing: it needs no token.
  EXPECT_EQ(post("/v1/completions", greedy("a", 4)).status, 200);
}

TEST_F(ListingAccessTest, PrivateListingsWithoutAnAdminTokenAreClosedToAll) {
  start_listing(/*public_listings=*/false, /*admin_token=*/"");
  EXPECT_EQ(model_ids(), std::vector<std::string>{kServed});
  EXPECT_EQ(http_call(port_, http::verb::get, "/metrics").status, 403);
}

}  // namespace
}  // namespace loragate::testing

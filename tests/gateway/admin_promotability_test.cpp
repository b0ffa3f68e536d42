// GET /admin/bases says for each loaded base that does not serve whether
// promote (without force) would take it, and why not: the names it lacks and
// the evaluation history's reasons, the same checks promote makes.
#include <gtest/gtest.h>

#include "registry/evaluation_store.h"
#include "tests/gateway/admin_fixture.h"
#include "upgrade/promotion_check.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

class AdminPromotabilityTest : public AdminGatewayTest {
 protected:
  json base_listed(const std::string& name) {
    const json listed = admin(http::verb::get, "/admin/bases").json();
    for (const json& b : listed.at("data")) {
      if (b["name"] == name) return b;
    }
    ADD_FAILURE() << name << " is not listed";
    return json::object();
  }

  static bool mentions(const json& lines, const std::string& part) {
    for (const json& l : lines) {
      if (l.get<std::string>().find(part) != std::string::npos) return true;
    }
    return false;
  }
};

TEST_F(AdminPromotabilityTest, EachCandidateSaysWhetherItMayBePromotedAndWhyNot) {
  ASSERT_EQ(admin(http::verb::post, "/admin/bases", {{"name", "v2"}, {"path", model_dir()}}).status, 202);
  ASSERT_TRUE(wait_for_base("v2", "candidate", std::chrono::seconds(30)));
  EXPECT_FALSE(base_listed("stories").contains("promotable")) << "the serving base is not a candidate";

  // No evaluation asked (require_pass_to_promote off): nothing stands in the way, and it says so.
  json v2 = base_listed("v2");
  EXPECT_EQ(v2["promotable"], true) << v2.dump();
  EXPECT_EQ(v2["promotion_blocked_by"], json::array());
  EXPECT_NE(v2.value("promotion_note", "").find("require_pass_to_promote is off"), std::string::npos) << v2.dump();

  // A scenario of the serving base with no version on v2 blocks it, with or without evaluations.
  ASSERT_EQ(admin(http::verb::post, "/admin/adapters", {{"name", "a"}, {"path", lora_dir("a")}}).status, 201);
  ASSERT_EQ(admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "a"}}).status, 200);
  v2 = base_listed("v2");
  EXPECT_EQ(v2["promotable"], false);
  EXPECT_TRUE(mentions(v2["promotion_blocked_by"], "adapter 'a'")) << v2.dump();
  EXPECT_TRUE(mentions(v2["promotion_blocked_by"], "scenario 's'")) << v2.dump();

  // Promote asks the evaluation history (as `loragate serve` wires it with require_pass_to_promote).
  auto store = EvaluationStore::open(dir_ + "/registry.db");
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  bases_->set_promote_check([this, history = store->get()](const ServingBase& serving, const ServingBase& candidate) {
    return eval::promotion_blockers(*registry_, *history, {}, {serving.name(), serving.sha256()},
                                    {candidate.name(), candidate.sha256()});
  });
  ASSERT_EQ(admin(http::verb::post, "/admin/adapters", {{"name", "a"}, {"path", lora_dir("a")}, {"base", "v2"}}).status,
            201);
  ASSERT_EQ(admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "a"}, {"base", "v2"}}).status, 200);
  v2 = base_listed("v2");
  EXPECT_EQ(v2["promotable"], false);
  ASSERT_EQ(v2["promotion_blocked_by"].size(), 1u) << v2.dump();
  EXPECT_TRUE(mentions(v2["promotion_blocked_by"], "no passing evaluation")) << v2.dump();
  EXPECT_FALSE(v2.contains("promotion_note"));
  ClientResponse refused = admin(http::verb::post, "/admin/bases/v2/promote", json::object());
  EXPECT_EQ(refused.status, 409);
  EXPECT_NE(refused.body.find("no passing evaluation"), std::string::npos) << refused.body;
  bases_->set_promote_check(nullptr);  // the store goes before the fixture's BaseSet
}

}  // namespace
}  // namespace loragate::testing

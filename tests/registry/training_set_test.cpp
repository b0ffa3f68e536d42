// The scenarios' training sets in the registry: recorded per scenario name
// and shared by that scenario on every base, replaced by a second set, kept
// across reopening the file, refused for a name no base has or a malformed
// record, and removed with the last scenario of its name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "registry/registry.h"
#include "tests/registry/pg_server.h"
#include "tests/registry/registry_fixtures.h"

namespace loragate::testing {
namespace {

class TrainingSetTest : public OnBothBackends<RegistryLocationTest> {
 protected:
  void SetUp() override {
    OnBothBackends::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    open_registry();
    ASSERT_TRUE(reg_->upsert_base_model(base_model("v1")).is_ok());
    ASSERT_TRUE(reg_->upsert_base_model(base_model("v2", BaseModelState::kCandidate)).is_ok());
    for (const char* base : {"v1", "v2"}) {
      ASSERT_TRUE(reg_->add_adapter(adapter("mia-lora", base)).is_ok());
      ASSERT_TRUE(reg_->set_scenario("mia", base, "mia-lora").is_ok());
    }
  }
  void open_registry() {
    reg_.reset();
    auto reg = Registry::open(location("registry.db"));
    ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
    reg_ = std::move(reg).value();
  }
  static TrainingSetRecord training(const std::string& scenario, const std::string& file,
                                    const std::string& config = R"({"steps": 200})") {
    TrainingSetRecord t;
    t.scenario = scenario;
    t.path = "/data/" + file;
    t.sha256 = sha256_hex(file);
    t.config = config;
    return t;
  }

  std::unique_ptr<Registry> reg_;
};

TEST_P(TrainingSetTest, RoundTripsPerScenarioNameAcrossReopening) {
  auto stored = reg_->set_training_set(training("mia", "mia.jsonl", R"({"steps": 5, "lora": {"rank": 4}})"));
  ASSERT_TRUE(stored.is_ok()) << stored.status().to_string();
  EXPECT_EQ(stored->path, "/data/mia.jsonl");
  EXPECT_GT(stored->created_at, 0);
  EXPECT_EQ(stored->created_at, stored->updated_at);
  open_registry();
  auto read = reg_->get_training_set("mia");
  ASSERT_TRUE(read.is_ok()) << read.status().to_string();
  EXPECT_EQ(read->scenario, "mia");
  EXPECT_EQ(read->path, "/data/mia.jsonl");
  EXPECT_EQ(read->sha256, sha256_hex("mia.jsonl"));
  EXPECT_EQ(nlohmann::json::parse(read->config), nlohmann::json::parse(R"({"steps": 5, "lora": {"rank": 4}})"));
  EXPECT_EQ(read->created_at, stored->created_at);

  // A second set replaces the first; the list has one row per scenario name.
  ASSERT_TRUE(reg_->set_training_set(training("mia", "mia-v2.jsonl")).is_ok());
  auto all = reg_->list_training_sets();
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].path, "/data/mia-v2.jsonl");
  EXPECT_EQ((*all)[0].sha256, sha256_hex("mia-v2.jsonl"));
}

TEST_P(TrainingSetTest, RefusesUnknownScenariosAndMalformedRecords) {
  EXPECT_STATUS(reg_->set_training_set(training("cat", "cat.jsonl")).status(), StatusCode::kNotFound,
                "no base has a scenario of that name");
  EXPECT_STATUS(reg_->get_training_set("mia").status(), StatusCode::kNotFound, "has no training set");
  TrainingSetRecord bad = training("mia", "mia.jsonl");
  bad.sha256 = "abc";
  EXPECT_STATUS(reg_->set_training_set(bad).status(), StatusCode::kInvalidArgument, "64 lowercase hex");
  bad = training("mia", "mia.jsonl", "[1, 2]");
  EXPECT_STATUS(reg_->set_training_set(bad).status(), StatusCode::kInvalidArgument, "not a JSON object");
  bad = training("mia", "mia.jsonl");
  bad.path = "";
  EXPECT_STATUS(reg_->set_training_set(bad).status(), StatusCode::kInvalidArgument, "has no path");
  bad = training("a b", "mia.jsonl");
  EXPECT_EQ(reg_->set_training_set(bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(reg_->list_training_sets()->empty());
}

TEST_P(TrainingSetTest, GoesWithTheLastScenarioOfItsName) {
  ASSERT_TRUE(reg_->set_training_set(training("mia", "mia.jsonl")).is_ok());
  ASSERT_TRUE(reg_->remove_scenario("mia", "v1").is_ok());
  EXPECT_TRUE(reg_->get_training_set("mia").is_ok()) << "v2 still has scenario mia";
  ASSERT_TRUE(reg_->remove_scenario("mia", "v2").is_ok());
  EXPECT_EQ(reg_->get_training_set("mia").status().code(), StatusCode::kNotFound);
}


INSTANTIATE_TEST_SUITE_P(Backends, TrainingSetTest, kBothBackends, backend_name);

}  // namespace
}  // namespace loragate::testing

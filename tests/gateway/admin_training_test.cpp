// Scenarios own their training data: PUT /admin/scenarios/{name} with
// `train: {path, config}` records the file (inside the adapter or training
// roots, hashed by the server) and the full training config, GET shows it on
// the listing and on the one scenario, a repoint without `train` keeps it,
// and a file outside the roots, a bad config or an unknown key is refused
// before anything is written.
#include <fstream>

#include "common/sha256.h"
#include "tests/gateway/admin_fixture.h"

namespace loragate::testing {
namespace {

using nlohmann::json;

class AdminTrainingTest : public AdminGatewayTest {
 protected:
  // A small JSONL training set at `path`.
  static void write_training_set(const std::string& path) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream out(path);
    out << R"({"prompt": "Once upon a time there was a girl named", "completion": " Mia."})" << "\n"
        << R"({"prompt": "One day", "completion": " Mia went to the park."})" << "\n";
  }
  ClientResponse set_scenario(const json& train) {
    json body = {{"adapter", "a"}};
    if (!train.is_null()) body["train"] = train;
    return admin(http::verb::put, "/admin/scenarios/s", body);
  }
  void SetUp() override {
    AdminGatewayTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(admin(http::verb::post, "/admin/adapters", {{"name", "a"}, {"path", lora_dir("a")}}).status, 201);
  }
};

TEST_F(AdminTrainingTest, RecordsTheTrainingSetAndItsFullConfig) {
  const std::string data = dir_ + "/adapters/data/mia.jsonl";
  write_training_set(data);
  ClientResponse set = set_scenario({{"path", data}, {"config", {{"steps", 5}, {"lora", {{"rank", 4}}}}}});
  ASSERT_EQ(set.status, 200) << set.body;
  const json train = set.json()["train"];
  EXPECT_EQ(train["path"], std::filesystem::canonical(data).string());
  EXPECT_EQ(train["sha256"], sha256_file(data).value());
  EXPECT_EQ(train["config"]["steps"], 5);
  EXPECT_EQ(train["config"]["lora"]["rank"], 4);
  // Keys not given are recorded with the recipe they stand for: the fixtures' one.
  EXPECT_EQ(train["config"]["batch"], 16);
  EXPECT_DOUBLE_EQ(train["config"]["lora"]["alpha"].get<double>(), 16.0);
  EXPECT_DOUBLE_EQ(train["config"]["optimizer"]["lr"].get<double>(), 2e-3);
  EXPECT_EQ(train["config"]["lora"]["targets"].size(), 7u);

  const json listed = admin(http::verb::get, "/admin/scenarios").json();
  ASSERT_EQ(listed["data"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["data"][0]["train"], train);
  const json one = admin(http::verb::get, "/admin/scenarios/s").json();
  EXPECT_EQ(one["adapter"], "a");
  EXPECT_EQ(one["train"], train);
  EXPECT_EQ(admin(http::verb::get, "/admin/scenarios/nope").status, 404);

  // Repointing without `train` keeps it; the file as recorded is what an upgrade checks.
  ASSERT_EQ(admin(http::verb::post, "/admin/adapters", {{"name", "b"}, {"path", lora_dir("b")}}).status, 201);
  ClientResponse repointed = admin(http::verb::put, "/admin/scenarios/s", {{"adapter", "b"}});
  ASSERT_EQ(repointed.status, 200) << repointed.body;
  EXPECT_EQ(repointed.json()["train"], train);
  // And it survives in the registry, not only in the answer.
  EXPECT_EQ(registry_->get_training_set("s")->sha256, sha256_file(data).value());
}

TEST_F(AdminTrainingTest, RefusesFilesOutsideTheRootsAndBadConfigsWritingNothing) {
  const std::string outside = dir_ + "/elsewhere/mia.jsonl";
  write_training_set(outside);
  ClientResponse r = set_scenario({{"path", outside}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("training.roots or adapters.roots"), std::string::npos) << r.body;
  EXPECT_EQ(admin(http::verb::get, "/admin/scenarios/s").status, 404) << "nothing may be written";

  const std::string inside = dir_ + "/adapters/mia.jsonl";
  write_training_set(inside);
  r = set_scenario({{"path", inside}, {"config", {{"lora", {{"rank", 0}}}}}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("lora.rank"), std::string::npos) << r.body;
  r = set_scenario({{"path", inside}, {"config", {{"stpes", 5}}}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("stpes"), std::string::npos) << r.body;
  r = set_scenario({{"path", inside}, {"recipe", "x"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("unknown key 'recipe'"), std::string::npos) << r.body;
  r = set_scenario({{"path", "relative/mia.jsonl"}});
  EXPECT_EQ(r.status, 400) << r.body;
  r = set_scenario({{"path", dir_ + "/adapters"}});  // a directory is no training set
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(admin(http::verb::get, "/admin/scenarios/s").status, 404) << "nothing may be written";
  EXPECT_TRUE(registry_->list_training_sets()->empty());
}

}  // namespace
}  // namespace loragate::testing

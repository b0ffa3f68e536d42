// POST /admin/upgrades over a loopback server, on ../shared/eval with a short
// recipe (a few optimizer steps) and gates that a few steps can meet (the
// adapters' keyword rate, and the base-quality gates that tell a damaged
// base): a scenario without a training set blocks the upgrade unless
// skipped; an upgrade retrains, registers, evaluates and promotes; a cancel
// leaves a checkpoint and asking again resumes from it under the same id;
// after a restart an unfinished upgrade shows interrupted. The stages: a bad
// base is rejected before any training; an adapter that holds on the
// candidate is carried over, not retrained.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "bases/base_set.h"
#include "gateway/admin/admin_api.h"
#include "gateway/gateway.h"
#include "gateway/registry_resolver.h"
#include "registry/evaluation_store.h"
#include "registry/registry.h"
#include "registry/upgrade_store.h"
#include "tests/gateway/http_test_client.h"
#include "tests/test_util.h"
#include "upgrade/evaluation_jobs.h"
#include "upgrade/promotion_check.h"
#include "upgrade/upgrade_job.h"

namespace loragate::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kToken = "upgrade-token";

std::string eval_dir() { return shared_dir() + "/eval"; }

class AdminUpgradesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors");
    dir_ = make_temp_dir("lg-upgrades");
    std::filesystem::create_directories(dir_ + "/suite");
    // One scenario keeps the evaluation short; the gates are the defaults but for the adapter
    // rules a few training steps cannot meet (a keyword floor stays).
    std::ofstream(dir_ + "/suite/suite.yaml") << "scenarios:\n  mia: {eval: " << eval_dir()
                                              << "/scenarios/mia/eval.jsonl, max_tokens: 48}\ngeneric: "
                                              << eval_dir() << "/generic/heldout.jsonl\n";
    std::ofstream(dir_ + "/suite/gates.yaml")
        << "adapter:\n  keyword_rate: {floor: 0.5, max_drop: null}\n  exact_match_rate:\n  rougeL_f1:\n  token_f1:\n  nll_mean:\n"
           "  negative_flip_rate:\nrecorded:\n";
    auto registry = Registry::open(dir_ + "/registry.db");
    ASSERT_TRUE(registry.is_ok()) << registry.status().to_string();
    registry_ = std::move(registry).value();
    auto runs = EvaluationStore::open(dir_ + "/registry.db");
    ASSERT_TRUE(runs.is_ok()) << runs.status().to_string();
    runs_ = std::move(runs).value();
    auto store = UpgradeStore::open(dir_ + "/registry.db");
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    store_ = std::move(store).value();
    auto required = eval::load_promotion_requirements(dir_ + "/suite/suite.yaml", dir_ + "/suite/gates.yaml");
    ASSERT_TRUE(required.is_ok()) << required.status().to_string();

    BaseSetOptions o;
    o.engine.max_loras = 2;
    o.engine.kv_cache_bytes = 8ll << 20;
    bases_ = std::make_unique<BaseSet>(o, registry_.get());
    ASSERT_TRUE(bases_->start_serving({"online", shared_dir() + "/models/stories260K", WeightType::kF32}, "test").is_ok());
    bases_->set_promote_check([this, req = *required](const ServingBase& serving, const ServingBase& candidate) {
      return eval::promotion_blockers(*registry_, *runs_, req, {serving.name(), serving.sha256()},
                                      {candidate.name(), candidate.sha256()});
    });
    const std::vector<std::string> eval_roots = {dir_ + "/suite", eval_dir()};
    jobs_ = std::make_unique<eval::EvaluationJobs>(bases_.get(), registry_.get(), runs_.get(),
                                                   eval::EvaluationOptions{eval_roots, 1});
    auto resolver = RegistryModelResolver::create(registry_.get());
    ASSERT_TRUE(resolver.is_ok());
    resolver_ = std::move(resolver).value();
    AdminOptions admin;
    admin.token = kToken;
    admin.adapter_roots = {eval_dir() + "/adapters"};
    admin.base_roots = {eval_dir() + "/bases", dir_ + "/bases"};
    admin.eval_roots = eval_roots;
    admin.served_name = "online";
    admin.training_roots = {eval_dir() + "/scenarios"};
    admin_ = std::make_unique<AdminApi>(admin, registry_.get(), bases_.get(), nullptr, jobs_.get(), runs_.get());
    admin_->set_route_cache(resolver_.get());
    make_upgrades();

    GatewayOptions options;
    options.server.port = 0;
    options.served_model_name = "online";
    options.admin_token = kToken;
    options.log_requests = false;
    auto gw = Gateway::create(options, bases_.get(), resolver_.get());
    ASSERT_TRUE(gw.is_ok()) << gw.status().to_string();
    gateway_ = std::move(gw).value();
    admin_->install(gateway_->router(), gateway_->blocking_work());
    auto port = gateway_->start();
    ASSERT_TRUE(port.is_ok()) << port.status().to_string();
    port_ = *port;
  }

  void TearDown() override {
    gateway_.reset();
    upgrades_.reset();
    admin_.reset();
    jobs_.reset();
    if (bases_ != nullptr) bases_->set_promote_check(nullptr);  // it reads the stores that go next
    bases_.reset();
    resolver_.reset();
    store_.reset();
    runs_.reset();
    registry_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // A new UpgradeJobs on the same record, as a restarted server makes.
  void make_upgrades() {
    upgrades_.reset();
    eval::UpgradeOptions uo;
    uo.trained_dir = dir_ + "/trained";
    uo.suite_path = dir_ + "/suite/suite.yaml";
    uo.gates_path = dir_ + "/suite/gates.yaml";
    uo.eval_roots = {dir_ + "/suite", eval_dir()};
    uo.training_roots = {eval_dir() + "/scenarios"};
    uo.poll = std::chrono::milliseconds(20);
    upgrades_ = std::make_unique<eval::UpgradeJobs>(bases_.get(), registry_.get(), jobs_.get(), runs_.get(),
                                                    store_.get(), admin_->upgrade_hooks(), uo);
    admin_->set_upgrades(upgrades_.get());
  }

  ClientResponse admin(http::verb method, const std::string& target, const json& body = nullptr) {
    return http_call(port_, method, target, body.is_null() ? "" : body.dump(),
                     {{"Authorization", std::string("Bearer ") + kToken}});
  }

  // Scenario `s` on the serving base with the online adapter, trained from its set with `config` (null: no set).
  void serve_scenario(const std::string& s, const json& config) {
    ASSERT_EQ(admin(http::verb::post, "/admin/adapters", {{"name", s}, {"path", eval_dir() + "/adapters/online/" + s}})
                  .status,
              201);
    json body = {{"adapter", s}};
    if (!config.is_null()) body["train"] = {{"path", eval_dir() + "/scenarios/" + s + "/train.jsonl"}, {"config", config}};
    ClientResponse r = admin(http::verb::put, "/admin/scenarios/" + s, body);
    ASSERT_EQ(r.status, 200) << r.body;
  }

  // Retraining every adapter unless `strategy` says otherwise: the fixtures' online adapters
  // would often carry over to candidate-good, and these tests are about retraining.
  json start(const std::string& candidate, bool promote, bool skip_untrained = false, int expect = 202,
             const std::string& strategy = "retrain-all", const std::string& path = "") {
    ClientResponse r = admin(http::verb::post, "/admin/upgrades",
                             {{"candidate", candidate},
                              {"path", path.empty() ? eval_dir() + "/bases/" + candidate : path},
                              {"promote", promote},
                              {"skip_untrained", skip_untrained},
                              {"strategy", strategy}});
    EXPECT_EQ(r.status, expect) << r.body;
    return r.json();
  }

  json get(int64_t id) { return admin(http::verb::get, "/admin/upgrades/" + std::to_string(id)).json(); }

  // Polls until `done` holds for the upgrade (or 120 s), returning the last status seen.
  template <typename Pred>
  json wait(int64_t id, Pred done) {
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    json now = get(id);
    while (!done(now) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      now = get(id);
    }
    EXPECT_TRUE(done(now)) << "timed out: " << now.dump();
    return now;
  }
  static bool finished(const json& u) {
    const std::string s = u.value("state", "");
    return s == "passed" || s == "failed" || s == "promoted" || s == "cancelled" || s == "interrupted";
  }
  static json short_recipe(int steps) { return {{"steps", steps}, {"batch", 8}}; }

  std::string dir_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<EvaluationStore> runs_;
  std::unique_ptr<UpgradeStore> store_;
  std::unique_ptr<BaseSet> bases_;
  std::unique_ptr<eval::EvaluationJobs> jobs_;
  std::unique_ptr<RegistryModelResolver> resolver_;
  std::unique_ptr<AdminApi> admin_;
  std::unique_ptr<eval::UpgradeJobs> upgrades_;
  std::unique_ptr<Gateway> gateway_;
  uint16_t port_ = 0;
};

TEST_F(AdminUpgradesTest, RetrainsRegistersEvaluatesAndPromotes) {
  serve_scenario("mia", short_recipe(4));
  const json started = start("candidate-good", /*promote=*/true);
  ASSERT_TRUE(started.contains("id")) << started.dump();
  const int64_t id = started["id"];
  const json done = wait(id, finished);
  ASSERT_EQ(done["state"], "promoted") << done.dump(2);
  EXPECT_EQ(done["verdict"], "pass");
  EXPECT_TRUE(done["error"].is_null()) << done.dump();
  ASSERT_EQ(done["steps"].size(), 1u);
  const json step = done["steps"][0];
  EXPECT_EQ(step["scenario"], "mia");
  EXPECT_EQ(step["state"], "registered");
  EXPECT_EQ(step["total_steps"], 4);
  const std::string out = step["out_dir"];
  EXPECT_EQ(out.rfind(dir_ + "/trained/candidate-good/mia-", 0), 0u) << out;
  for (const char* file : {"adapter_config.json", "adapter_model.safetensors", "training.json"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + file)) << file;
  }
  EXPECT_FALSE(std::filesystem::exists(out + "/checkpoint"));
  ASSERT_TRUE(done["report"].is_string()) << done.dump();
  EXPECT_TRUE(std::filesystem::exists(done["report"].get<std::string>()));
  EXPECT_TRUE(done["gates"].is_array() && !done["gates"].empty()) << done.dump();

  // The candidate serves now, with the retrained adapter behind the scenario.
  EXPECT_EQ(bases_->serving()->name(), "candidate-good");
  EXPECT_EQ(registry_->resolve_scenario("mia", "candidate-good").value(), "mia");
  EXPECT_EQ(std::filesystem::canonical(registry_->get_adapter("mia", "candidate-good")->path),
            std::filesystem::canonical(out));
  // Recorded: the listing shows it, and the serving base cannot be upgraded to.
  const json listed = admin(http::verb::get, "/admin/upgrades").json();
  ASSERT_EQ(listed["data"].size(), 1u);
  EXPECT_EQ(listed["data"][0]["state"], "promoted");
  EXPECT_EQ(store_->get(id)->state, "promoted");
  start("candidate-good", true, false, 409);
}

TEST_F(AdminUpgradesTest, AScenarioWithoutTrainingDataBlocksItUnlessSkipped) {
  serve_scenario("mia", short_recipe(2));
  serve_scenario("cat", nullptr);
  const json refused = start("candidate-good", /*promote=*/true, /*skip_untrained=*/false, 409);
  const std::string message = refused["error"]["message"];
  EXPECT_NE(message.find("'cat'"), std::string::npos) << message;
  EXPECT_EQ(message.find("'mia'"), std::string::npos) << "mia has a training set: " << message;
  EXPECT_EQ(admin(http::verb::get, "/admin/upgrades").json()["data"].size(), 0u) << "nothing may start";

  const json started = start("candidate-good", /*promote=*/false, /*skip_untrained=*/true);
  const json done = wait(started["id"], finished);
  // The suite judges mia only: it passes, and cat is listed as skipped.
  EXPECT_EQ(done["state"], "passed") << done.dump(2);
  for (const json& step : done["steps"]) {
    EXPECT_EQ(step["state"].get<std::string>(), step["scenario"] == "cat" ? "skipped" : "registered") << step.dump();
  }
  EXPECT_EQ(bases_->serving()->name(), "online") << "promote was not asked";
}

TEST_F(AdminUpgradesTest, ACancelKeepsACheckpointAndAskingAgainResumesIt) {
  serve_scenario("mia", {{"steps", 60}, {"batch", 8}, {"checkpoint_every", 0}});
  const int64_t id = start("candidate-good", /*promote=*/false)["id"];
  wait(id, [](const json& u) { return u["steps"][0].value("step", 0) >= 2 || finished(u); });
  ClientResponse cancelled = admin(http::verb::delete_, "/admin/upgrades/" + std::to_string(id));
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  const json stopped = wait(id, finished);
  ASSERT_EQ(stopped["state"], "cancelled") << stopped.dump(2);
  const json step = stopped["steps"][0];
  EXPECT_EQ(step["state"], "cancelled");
  const int64_t reached = step["step"];
  EXPECT_GE(reached, 2);
  EXPECT_LT(reached, 60);
  // The folder is content-addressed (known once trained): look under the candidate's.
  bool checkpoint = false;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/trained/candidate-good")) {
    checkpoint = checkpoint || std::filesystem::exists(e.path() / "checkpoint");
  }
  EXPECT_TRUE(checkpoint) << "a cancelled training leaves its checkpoint";
  EXPECT_EQ(bases_->serving()->name(), "online");

  // Asking again resumes the same upgrade, and the training goes on from the checkpoint.
  const json again = start("candidate-good", /*promote=*/false);
  EXPECT_EQ(again["id"], id);
  const json resumed = wait(id, [](const json& u) { return u["steps"][0].value("step", 0) >= 1 || finished(u); });
  EXPECT_GT(resumed["steps"][0].value("step", 0), 1) << "it started over: " << resumed.dump(2);
  ASSERT_EQ(admin(http::verb::post, "/admin/upgrades/" + std::to_string(id) + "/cancel").status, 200);
  EXPECT_EQ(wait(id, finished)["state"], "cancelled");
}

TEST_F(AdminUpgradesTest, ARestartShowsAnUnfinishedUpgradeInterrupted) {
  serve_scenario("mia", {{"steps", 60}, {"batch", 8}});
  const int64_t id = start("candidate-good", /*promote=*/false)["id"];
  wait(id, [](const json& u) { return u["steps"][0].value("step", 0) >= 1 || finished(u); });
  make_upgrades();  // the server stops (the running upgrade is cut) and starts again
  json after = get(id);
  EXPECT_EQ(after["state"], "interrupted") << after.dump(2);
  EXPECT_NE(after["error"].get<std::string>().find("resume"), std::string::npos) << after.dump();

  // A crash leaves no chance to record anything: the row still says training, and the next start says interrupted.
  UpgradeRecord crashed = store_->get(id).value();
  crashed.state = "training";
  ASSERT_TRUE(store_->update(crashed).is_ok());
  make_upgrades();
  EXPECT_EQ(get(id)["state"], "interrupted");
  EXPECT_EQ(admin(http::verb::get, "/admin/upgrades/999").status, 404);
  EXPECT_EQ(admin(http::verb::get, "/admin/upgrades/x").status, 400);
}

TEST_F(AdminUpgradesTest, ABadBaseIsRejectedBeforeAnyAdapterIsTrained) {
  serve_scenario("mia", short_recipe(4));
  const json started = start("candidate-bad", /*promote=*/true, false, 202, "transfer-first");
  const json done = wait(started["id"], finished);
  ASSERT_EQ(done["state"], "failed") << done.dump(2);
  EXPECT_EQ(done["strategy"], "transfer-first");
  const std::string error = done["error"];
  EXPECT_NE(error.find("need no adapter"), std::string::npos) << error;
  EXPECT_NE(error.find("generic/perplexity"), std::string::npos) << error;
  ASSERT_EQ(done["stages"].size(), 5u) << done.dump(2);
  EXPECT_EQ(done["stages"][0]["name"], "base");
  EXPECT_EQ(done["stages"][0]["state"], "failed");
  EXPECT_GT(done["stages"][0]["seconds"].get<double>(), 0.0);
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(done["stages"][i]["state"], "pending") << done["stages"][i].dump();
  const json step = done["steps"][0];
  EXPECT_EQ(step["step"], 0) << "never trained";
  EXPECT_EQ(step["outcome"], "failed");
  // Nothing was trained: the candidate's folder holds only the base stage's report.
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/trained/candidate-bad")) {
    EXPECT_FALSE(e.is_directory()) << e.path();
  }
  EXPECT_EQ(done["verdict"], "fail");
  ASSERT_TRUE(done["report"].is_string());
  EXPECT_TRUE(std::filesystem::exists(done["report_html"].get<std::string>()));
  EXPECT_EQ(bases_->serving()->name(), "online");
}

TEST_F(AdminUpgradesTest, AnAdapterThatHoldsOnTheCandidateIsCarriedOverNotRetrained) {
  // The candidate is a byte-for-byte copy of the online base: every online adapter holds by construction.
  std::filesystem::create_directories(dir_ + "/bases");
  std::filesystem::copy(shared_dir() + "/models/stories260K", dir_ + "/bases/copy");
  serve_scenario("mia", short_recipe(4));
  const json started = start("copy", /*promote=*/true, false, 202, "transfer-first", dir_ + "/bases/copy");
  const json done = wait(started["id"], finished);
  ASSERT_EQ(done["state"], "promoted") << done.dump(2);
  const json step = done["steps"][0];
  EXPECT_EQ(step["outcome"], "transferred") << step.dump();
  EXPECT_EQ(step["transfer"], "pass");
  EXPECT_EQ(step["step"], 0) << "not trained";
  EXPECT_EQ(std::filesystem::canonical(step["out_dir"].get<std::string>()),
            std::filesystem::canonical(eval_dir() + "/adapters/online/mia"));
  std::map<std::string, std::string> stage;
  for (const json& s : done["stages"]) stage[s["name"]] = s["state"];
  EXPECT_EQ(stage["base"], "done");
  EXPECT_EQ(stage["transfer"], "done");
  EXPECT_EQ(stage["retrain"], "skipped");
  EXPECT_EQ(stage["evaluate"], "done");
  EXPECT_EQ(stage["promote"], "done");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/trained/copy/mia")) << "nothing retrained";
  // The same weights: distance 0 and cosine 1 on every module.
  ASSERT_TRUE(done["similarity"].contains("modules")) << done["similarity"].dump();
  EXPECT_EQ(done["similarity"]["rel_frobenius"], 0.0);
  for (const json& m : done["similarity"]["modules"]) EXPECT_NEAR(m["cosine_min"].get<double>(), 1.0, 1e-9) << m.dump();
  EXPECT_EQ(bases_->serving()->name(), "copy");
  EXPECT_EQ(std::filesystem::canonical(registry_->get_adapter("mia", "copy")->path),
            std::filesystem::canonical(eval_dir() + "/adapters/online/mia"));
}

TEST_F(AdminUpgradesTest, AScenarioWithoutTrainingDataIsCarriedOverWhenItsAdapterHolds) {
  std::filesystem::create_directories(dir_ + "/bases");
  std::filesystem::copy(shared_dir() + "/models/stories260K", dir_ + "/bases/copy");
  serve_scenario("mia", nullptr);  // no training set: transfer-first still carries it over
  const json started = start("copy", /*promote=*/false, false, 202, "transfer-first", dir_ + "/bases/copy");
  const json done = wait(started["id"], finished);
  ASSERT_EQ(done["state"], "passed") << done.dump(2);
  EXPECT_EQ(done["steps"][0]["outcome"], "transferred") << done["steps"][0].dump();
  // retrain-all still refuses it up front: it has nothing to retrain from.
  const json refused = start("copy", false, false, 409, "retrain-all", dir_ + "/bases/copy");
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("'mia'"), std::string::npos) << refused.dump();
}

TEST_F(AdminUpgradesTest, AnUnknownStrategyIsRefusedNamingIt) {
  serve_scenario("mia", short_recipe(2));
  const json refused = start("candidate-good", false, false, 400, "guess");
  EXPECT_EQ(refused["error"]["param"], "strategy") << refused.dump();
}

}  // namespace
}  // namespace loragate::testing

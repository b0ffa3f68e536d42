// EvaluationJobs on real bases (../shared/eval): at most max_running
// evaluations run at once, later ones wait "queued" up to kMaxQueued and
// the next is refused; a suite whose scenario is not routed is refused
// before any file it names is opened; cancel_all() ends them all promptly
// and every one is stored cancelled.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "bases/base_set.h"
#include "registry/evaluation_store.h"
#include "registry/registry.h"
#include "tests/test_util.h"
#include "upgrade/evaluation_jobs.h"

namespace loragate::eval {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string eval_dir() { return testing::shared_dir() + "/eval"; }

class EvaluationJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-good/model.safetensors");
    dir_ = testing::make_temp_dir("lg-jobs-test");
    auto registry = Registry::open(dir_ + "/registry.db");
    ASSERT_TRUE(registry.is_ok()) << registry.status().to_string();
    registry_ = std::move(registry).value();
    auto store = EvaluationStore::open(dir_ + "/registry.db");
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    store_ = std::move(store).value();
    BaseSetOptions o;
    o.engine.max_loras = 2;
    o.engine.kv_cache_bytes = 8ll << 20;
    bases_ = std::make_unique<BaseSet>(o, registry_.get());
    ASSERT_TRUE(bases_->start_serving({"online", testing::shared_dir() + "/models/stories260K", WeightType::kF32}, "test")
                    .is_ok());
    ASSERT_TRUE(bases_->add({"candidate-good", eval_dir() + "/bases/candidate-good", WeightType::kF32}).is_ok());
    ASSERT_TRUE(bases_->wait_loaded("candidate-good", Clock::now() + std::chrono::seconds(60)));
    for (const char* base : {"online", "candidate-good"}) {
      AdapterRecord mia{"mia", base, eval_dir() + "/adapters/" + base + "/mia", 8, 16, {"q_proj"}, "", 0};
      ASSERT_TRUE(registry_->add_adapter(mia).is_ok());
      ASSERT_TRUE(registry_->set_scenario("mia", base, "mia").is_ok());
      ASSERT_TRUE(bases_->find(base).value()->adapters()->add("mia", mia.path).is_ok());
    }
    // The mia set 50 times over: an evaluation of minutes on this model.
    std::ifstream in(eval_dir() + "/scenarios/mia/eval.jsonl");
    std::ofstream out(dir_ + "/long.jsonl");
    std::vector<json> items;
    for (std::string line; std::getline(in, line);) items.push_back(json::parse(line));
    for (int round = 0; round < 50; ++round) {
      for (json item : items) {
        item["id"] = item.at("id").get<std::string>() + "-r" + std::to_string(round);
        out << item.dump() << "\n";
      }
    }
    std::ofstream(dir_ + "/long.yaml") << "scenarios:\n  mia: {eval: long.jsonl, max_tokens: 200}\n";
  }

  void TearDown() override {
    bases_.reset();
    store_.reset();
    registry_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  static std::map<std::string, int> states(const EvaluationJobs& jobs) {
    std::map<std::string, int> count;
    for (const JobStatus& j : jobs.list()) ++count[j.state];
    return count;
  }

  std::string dir_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<EvaluationStore> store_;
  std::unique_ptr<BaseSet> bases_;
};

TEST_F(EvaluationJobsTest, MaxRunningRunTheRestQueueUpToTheCapThenRefused) {
  EvaluationOptions options;
  options.max_running = 2;
  auto jobs = std::make_unique<EvaluationJobs>(bases_.get(), registry_.get(), store_.get(), options);
  const size_t started = 2 + EvaluationJobs::kMaxQueued;
  for (size_t i = 0; i < started; ++i) {
    Result<JobStatus> job = jobs->start("candidate-good", dir_ + "/long.yaml", "");
    ASSERT_TRUE(job.is_ok()) << i << ": " << job.status().to_string();
    EXPECT_EQ(job->online, "online");
  }
  std::map<std::string, int> count;
  for (auto deadline = Clock::now() + std::chrono::seconds(30); Clock::now() < deadline;) {
    count = states(*jobs);
    if (count["running"] == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(count["running"], 2);
  EXPECT_EQ(count["queued"], static_cast<int>(EvaluationJobs::kMaxQueued));
  Result<JobStatus> refused = jobs->start("candidate-good", dir_ + "/long.yaml", "");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("too many evaluations queued"), std::string::npos)
      << refused.status().message();

  const auto cancel = Clock::now();
  jobs.reset();  // cancel_all(), then joins the workers
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - cancel).count(), 10.0);
  auto stored = store_->list(100);
  ASSERT_TRUE(stored.is_ok());
  ASSERT_EQ(stored->size(), started);
  for (const EvaluationRecord& r : *stored) EXPECT_EQ(r.verdict, "cancelled");
}

TEST_F(EvaluationJobsTest, UnroutedScenarioIsRefusedBeforeItsFileIsOpened) {
  const std::string fifo = dir_ + "/items.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(dir_ + "/ghost.yaml") << "scenarios:\n  ghost: {eval: items.fifo}\n";
  EvaluationJobs jobs(bases_.get(), registry_.get(), store_.get());
  auto start = std::async(std::launch::async, [&] { return jobs.start("candidate-good", dir_ + "/ghost.yaml", ""); });
  if (start.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Blocked in open(): be the writer it waits for, so the test ends, and fail.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    FAIL() << "start() blocked on a FIFO";
  }
  Result<JobStatus> job = start.get();
  ASSERT_FALSE(job.is_ok());
  EXPECT_NE(job.status().message().find("suite scenario 'ghost' on base 'online'"), std::string::npos)
      << job.status().message();
  EXPECT_TRUE(jobs.list().empty());
  // Outside the roots given, the same suite file is refused before its YAML is read.
  Result<JobStatus> outside = jobs.start("candidate-good", dir_ + "/long.yaml", "", {dir_ + "/elsewhere"});
  ASSERT_FALSE(outside.is_ok());
}

}  // namespace
}  // namespace loragate::eval

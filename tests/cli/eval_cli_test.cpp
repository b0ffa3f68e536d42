// `loragate eval run|ls|show` on the ../shared/eval fixtures, as an operator
// runs it: per-item greedy ids and aggregates as expected_metrics.json says,
// candidate-good passes, candidate-bad fails on base quality, online against
// itself passes with agreement 1, tighter gates change the verdict, a stored
// run reproduces its verdict, and the reports are written.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

using nlohmann::json;

class EvalCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/bases/candidate-bad/model.safetensors");
    dir_ = testing::make_temp_dir("lg-eval-cli");
    std::ofstream(dir_ + "/suite.yaml") << "scenarios:\n"
                                        << "  mia: {eval: " << eval_dir() << "/scenarios/mia/eval.jsonl}\n"
                                        << "  cat: {eval: " << eval_dir() << "/scenarios/cat/eval.jsonl}\n"
                                        << "  sunny: {eval: " << eval_dir() << "/scenarios/sunny/eval.jsonl}\n"
                                        << "generic: " << eval_dir() << "/generic/heldout.jsonl\n";
  }

  static std::string eval_dir() { return testing::shared_dir() + "/eval"; }
  static std::string base_dir(const std::string& base) {
    return base == "online" ? testing::shared_dir() + "/models/stories260K" : eval_dir() + "/bases/" + base;
  }

  // `eval run` of `candidate` (a base of the fixtures) against online; extra flags appended.
  // Latencies are the median of 3 back-to-back runs per item: these verdicts
  // are about quality, and the machine (sanitizer jobs beside) must not turn
  // one descheduled request into a latency fail of the same base.
  CliRun run(const std::string& candidate, const std::string& json_out, const std::string& extra = "") {
    return run_cli("eval run --online " + base_dir("online") + " --candidate " + base_dir(candidate) +
                   " --candidate-name " + candidate + " --online-adapters " + eval_dir() + "/adapters/online" +
                   " --candidate-adapters " + eval_dir() + "/adapters/" + candidate + " --suite " + dir_ +
                   "/suite.yaml --db " + dir_ + "/registry.db --latency-repeats 3 --json " + json_out + " " + extra);
  }

  static json read(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
  }

  std::string dir_;
};

TEST_F(EvalCliTest, CandidateGoodPassesWithTheReferenceOutputsAndIsStored) {
  CliRun r = run("candidate-good", dir_ + "/good.json", "--html " + dir_ + "/good.html");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("verdict: pass"), std::string::npos) << r.out;
  const json report = read(dir_ + "/good.json");
  const json expected = read(eval_dir() + "/expected_metrics.json");
  EXPECT_EQ(report["verdict"], "pass");
  for (const char* s : {"mia", "cat", "sunny"}) {
    for (auto [arm, base, key] : {std::tuple{"online", "online", "adapter"}, {"candidate", "candidate-good", "adapter"},
                                  {"online_no_adapter", "online", "no_adapter"},
                                  {"candidate_no_adapter", "candidate-good", "no_adapter"}}) {
      const json& want = expected["results"][base][s][key];
      const json& got = report["scenarios"][s][arm];
      for (size_t i = 0; i < want["items"].size(); ++i) {
        const json& w = want["items"][i];
        if (w["min_top2_margin"].get<double>() < 1e-3) continue;  // a float32 engine may break a near-tie
        EXPECT_EQ(got["items"][i]["generated_ids"], w["generated_ids"]) << s << " " << arm << " " << w["id"];
        EXPECT_NEAR(got["items"][i]["nll_sum"].get<double>(), w["nll_sum"].get<double>(),
                    1e-4 * w["n_ref_tokens"].get<double>());
      }
      for (const char* m : {"keyword_rate", "exact_match_rate", "rougeL_f1", "nll_mean", "perplexity"}) {
        EXPECT_NEAR(got["metrics"][m].get<double>(), want["metrics"][m].get<double>(), 1e-3) << s << " " << arm << " " << m;
      }
    }
  }
  for (auto [arm, base] : {std::pair{"online", "online"}, {"candidate", "candidate-good"}}) {
    EXPECT_NEAR(report["generic"][arm]["perplexity"].get<double>(),
                expected["generic_heldout"][base]["perplexity"].get<double>(), 1e-3);
  }
  EXPECT_NEAR(report["scenarios"]["mia"]["candidate"]["metrics"]["agreement"].get<double>(), 30.0 / 40, 1e-9);
  const std::string html = [&] {
    std::ifstream in(dir_ + "/good.html");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  EXPECT_NE(html.find("candidate-good"), std::string::npos);

  // The stored run gives the same verdict again from its items.
  CliRun show = run_cli("eval show 1 --db " + dir_ + "/registry.db");
  EXPECT_EQ(show.exit_code, 0) << show.out;
  EXPECT_NE(show.out.find("same as stored"), std::string::npos) << show.out;
  CliRun ls = run_cli("eval ls --db " + dir_ + "/registry.db");
  EXPECT_NE(ls.out.find("candidate-good-"), std::string::npos) << ls.out;
}

TEST_F(EvalCliTest, CandidateBadFailsOnBaseQuality) {
  CliRun r = run("candidate-bad", dir_ + "/bad.json");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("fail         generic/perplexity"), std::string::npos) << r.out;
  const json report = read(dir_ + "/bad.json");
  EXPECT_EQ(report["verdict"], "fail");
  bool base_quality_failed = false;
  for (const json& g : report["gates"]) {
    if (g["verdict"] == "fail") {
      const std::string metric = g["metric"];
      EXPECT_TRUE(g["scenario"] == "generic" || metric.rfind("no_adapter.", 0) == 0)
          << "only base-quality gates fail: " << g.dump();
      base_quality_failed = true;
    }
  }
  EXPECT_TRUE(base_quality_failed);
  EXPECT_EQ(report["scenarios"]["mia"]["candidate"]["metrics"]["keyword_rate"], 1.0)
      << "the retrained adapter hides the damage: only the base-quality gates see it";
}

TEST_F(EvalCliTest, OnlineAgainstItselfPassesAndTighterGatesChangeTheVerdict) {
  CliRun self = run_cli("eval run --online " + base_dir("online") + " --candidate " + base_dir("online") +
                        " --online-adapters " + eval_dir() + "/adapters/online --candidate-adapters " + eval_dir() +
                        "/adapters/online --suite " + dir_ + "/suite.yaml --db " + dir_ + "/registry.db --latency-repeats 3 --json " +
                        dir_ + "/self.json");
  ASSERT_EQ(self.exit_code, 0) << self.out;
  const json report = read(dir_ + "/self.json");
  for (const char* s : {"mia", "cat", "sunny"}) {
    EXPECT_EQ(report["scenarios"][s]["candidate"]["metrics"]["agreement"], 1.0) << s;
    EXPECT_EQ(report["scenarios"][s]["candidate"]["metrics"]["negative_flips"], 0) << s;
  }

  // The generic set's perplexity rises 4.5% on candidate-good: a 2% margin fails it, 5% leaves it undecided.
  std::ofstream(dir_ + "/tight.yaml") << "generic:\n  perplexity: {max_rise_rel: 0.02}\n";
  CliRun tight = run("candidate-good", dir_ + "/tight.json", "--gates " + dir_ + "/tight.yaml");
  EXPECT_EQ(tight.exit_code, 1) << tight.out;
  std::ofstream(dir_ + "/edge.yaml") << "generic:\n  perplexity: {max_rise_rel: 0.05}\n";
  CliRun edge = run("candidate-good", dir_ + "/edge.json", "--gates " + dir_ + "/edge.yaml");
  EXPECT_EQ(edge.exit_code, 3) << edge.out;
  EXPECT_EQ(read(dir_ + "/edge.json")["verdict"], "inconclusive");

  CliRun bad_gates = run_cli("eval run --online x --candidate y --suite z 2>&1");
  EXPECT_NE(bad_gates.exit_code, 0);
  std::ofstream(dir_ + "/typo.yaml") << "generic:\n  perplexity: {max_rise_rell: 0.05}\n";
  CliRun typo = run("candidate-good", dir_ + "/typo.json", "--gates " + dir_ + "/typo.yaml");
  EXPECT_EQ(typo.exit_code, 2) << typo.out;
  EXPECT_NE(typo.out.find("max_rise_rell"), std::string::npos) << typo.out;
}

}  // namespace
}  // namespace loragate

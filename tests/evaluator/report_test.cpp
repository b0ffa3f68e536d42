// Tests of evaluator/report.h: the JSON's shape and values, the round trip
// through run_from_json, the HTML's escaping and self-containment, and a
// headless Chromium rendering of the page (skipped without /usr/bin/chromium).
#include "evaluator/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "tests/evaluator/report_fixtures.h"
#include "tests/test_util.h"

namespace loragate::eval {
namespace {

using nlohmann::json;
using namespace report_fixtures;

TEST(ReportJson, HoldsEveryFieldOfTheRun) {
  const RunResult run = sample_run();
  const json j = report_json(run);
  EXPECT_EQ(j.at("format"), kRunJsonFormat);
  EXPECT_EQ(j.at("verdict"), "fail");
  EXPECT_EQ(j.at("id"), 42);
  EXPECT_EQ(j.at("started_at"), run.started_at);
  EXPECT_EQ(j.at("online_base"), run.online_base);
  EXPECT_EQ(j.at("online_sha256"), run.online_sha256);
  EXPECT_EQ(j.at("candidate_base"), run.candidate_base);
  EXPECT_EQ(j.at("candidate_sha256"), run.candidate_sha256);
  EXPECT_EQ(j.at("suite_path"), run.suite_path);
  EXPECT_EQ(j.at("suite_sha256"), run.suite_sha256);
  EXPECT_EQ(j.at("suite_text"), run.suite_text);
  EXPECT_EQ(j.at("gates_sha256"), run.gates_sha256);
  EXPECT_EQ(j.at("gates_text"), run.gates_text);
  EXPECT_EQ(j.at("seed").get<uint64_t>(), run.seed);
  EXPECT_EQ(j.at("scenario_order"), json({"mia", "cat", "sunny"}));

  ASSERT_EQ(j.at("gates").size(), run.gates.size());
  for (size_t i = 0; i < run.gates.size(); ++i) {
    const json& g = j["gates"][i];
    const GateResult& e = run.gates[i];
    EXPECT_EQ(g.at("scenario"), e.scenario);
    EXPECT_EQ(g.at("metric"), e.metric);
    EXPECT_EQ(g.at("against"), e.against);
    EXPECT_EQ(g.at("rule"), e.rule);
    EXPECT_EQ(g.at("verdict"), verdict_name(e.verdict));
    if (e.verdict != Verdict::kSkipped) {  // a skipped gate has no estimate: null
      EXPECT_EQ(g.at("estimate"), e.estimate);
      EXPECT_EQ(g.at("low"), e.low);
      EXPECT_EQ(g.at("high"), e.high);
    }
    EXPECT_EQ(g.at("margin"), e.margin);
    EXPECT_EQ(g.at("why"), e.why);
    EXPECT_EQ(g.at("method"), e.method);
    EXPECT_EQ(g.at("unit"), e.unit);
    EXPECT_EQ(g.at("n"), e.n);
    EXPECT_EQ(g.at("optional"), e.optional);
  }
  EXPECT_EQ(j["gates"].back()["verdict"], "skipped");
  EXPECT_TRUE(j["gates"].back()["estimate"].is_null());
  EXPECT_EQ(j.at("recorded_run_id"), 7);
  EXPECT_EQ(j.at("recorded_arm"), "candidate");
  EXPECT_EQ(j.at("online_tokenizer_sha256"), run.online_tokenizer_sha256);
  EXPECT_EQ(j.at("candidate_tokenizer_sha256"), run.candidate_tokenizer_sha256);
  EXPECT_EQ(j.at("latency_biased"), true);
  EXPECT_EQ(j["gates"][0]["verdict"], "inconclusive");
  EXPECT_EQ(j["gates"][1]["verdict"], "pass");

  ASSERT_EQ(j.at("scenarios").size(), 3u);
  for (const ScenarioResult& s : run.scenarios) {
    const json& sj = j["scenarios"].at(s.name);
    ASSERT_EQ(sj.size(), s.arms.size()) << s.name;
    for (const auto& [name, arm] : s.arms) {
      SCOPED_TRACE(s.name + "." + name);
      const json& aj = sj.at(name);
      EXPECT_EQ(aj.at("base"), arm.base);
      EXPECT_EQ(aj.at("base_sha256"), arm.base_sha256);
      EXPECT_EQ(aj.at("adapter"), arm.adapter);
      EXPECT_EQ(aj.at("adapter_sha256"), arm.adapter_sha256);
      expect_metrics(aj.at("metrics"), arm.metrics);
      ASSERT_EQ(aj.at("items").size(), arm.items.size());
      for (size_t i = 0; i < arm.items.size(); ++i) expect_item(aj["items"][i], arm.items[i]);
    }
  }
  EXPECT_TRUE(j["scenarios"]["mia"].contains("copied_adapter"));
  EXPECT_FALSE(j["scenarios"]["cat"].contains("copied_adapter"));

  for (const GenericResult& g : run.generic) {
    const json& gj = j.at("generic").at(g.arm);
    EXPECT_EQ(gj.at("perplexity"), g.perplexity);
    EXPECT_EQ(gj.at("nll_mean"), g.nll_mean);
    ASSERT_EQ(gj.at("rows").size(), g.row_nll_sum.size());
    EXPECT_EQ(gj["rows"][3]["nll_sum"], g.row_nll_sum[3]);
    EXPECT_EQ(gj["rows"][3]["n_tokens"], g.row_tokens[3]);
    EXPECT_EQ(gj["rows"][3]["n_bytes"], g.row_bytes.empty() ? 0 : g.row_bytes[3]);
  }
}

TEST(ReportJson, RoundTripsThroughText) {
  const RunResult run = sample_run();
  const json j = report_json(run);
  Result<RunResult> back = run_from_json(json::parse(j.dump()));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  // report_json writes every field, so equal JSON means equal runs; the keys
  // (scenario, arm and generic names) and the orders are checked on their own.
  EXPECT_EQ(report_json(*back), j);
  ASSERT_EQ(back->scenarios.size(), 3u);
  EXPECT_EQ(back->scenarios[0].name, "mia");
  EXPECT_EQ(back->scenarios[2].name, "sunny");
  EXPECT_EQ(back->scenarios[0].arms.at("copied_adapter").arm, "copied_adapter");
  EXPECT_EQ(back->scenarios[0].arms.at("candidate").items[1].continuation_text,
            run.scenarios[0].arms.at("candidate").items[1].continuation_text);
  ASSERT_EQ(back->generic.size(), 2u);
  EXPECT_EQ(back->generic[0].arm, "online");
  EXPECT_EQ(back->generic[1].arm, "candidate");
  EXPECT_EQ(back->generic[1].row_nll_sum, run.generic[1].row_nll_sum);
  EXPECT_EQ(back->seed, run.seed);
  EXPECT_EQ(back->verdict, Verdict::kFail);
  EXPECT_EQ(back->gates[0].verdict, Verdict::kInconclusive);
  const GateResult& skipped = back->gates.back();
  EXPECT_EQ(skipped.verdict, Verdict::kSkipped);
  EXPECT_TRUE(std::isnan(skipped.estimate));
  EXPECT_TRUE(skipped.optional);
  EXPECT_EQ(skipped.unit, "ms");
  EXPECT_EQ(back->gates[4].method, "wilson");
  EXPECT_EQ(back->gates[3].unit, "nats/byte");
  EXPECT_EQ(back->gates[3].n, 40);
  EXPECT_EQ(back->recorded_run_id, 7);
  EXPECT_EQ(back->recorded_arm, "candidate");
  EXPECT_TRUE(back->latency_biased);
  EXPECT_EQ(back->scenarios[1].arms.at("candidate").items[2].unfinished, "cancelled");
  EXPECT_EQ(back->scenarios[1].arms.at("candidate").items[2].reference_bytes, 57);
  EXPECT_EQ(back->generic[0].row_bytes, run.generic[0].row_bytes);
}

TEST(ReportJson, KeepsNanAndInfinity) {
  RunResult run = sample_run();
  run.gates[0].estimate = std::numeric_limits<double>::quiet_NaN();
  run.gates[0].high = std::numeric_limits<double>::infinity();
  run.gates[0].low = -std::numeric_limits<double>::infinity();
  const json j = report_json(run);
  EXPECT_TRUE(j["gates"][0]["estimate"].is_null());
  EXPECT_EQ(j["gates"][0]["high"], "inf");
  Result<RunResult> back = run_from_json(json::parse(j.dump()));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(std::isnan(back->gates[0].estimate));
  EXPECT_EQ(back->gates[0].high, std::numeric_limits<double>::infinity());
  EXPECT_EQ(back->gates[0].low, -std::numeric_limits<double>::infinity());
}

TEST(ReportJson, RejectsMalformedRunsNamingTheKey) {
  const json good = report_json(sample_run());
  json j = good;
  j["scenarios"]["mia"]["online"]["items"][3]["ttft_ms"] = "fast";
  Result<RunResult> r = run_from_json(j);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("scenarios.mia.online.items[3].ttft_ms"), std::string::npos)
      << r.status().message();

  j = good;
  j["gates"][2]["verdict"] = "maybe";
  r = run_from_json(j);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("gates[2].verdict"), std::string::npos) << r.status().message();

  j = good;
  j.erase("format");
  EXPECT_FALSE(run_from_json(j).is_ok());
  EXPECT_FALSE(run_from_json(json::array()).is_ok());

  // An absent key keeps its default: older stored runs stay readable.
  j = good;
  j["scenarios"]["cat"]["online"]["metrics"].erase("token_f1");
  r = run_from_json(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->scenarios[1].arms.at("online").metrics.token_f1, 0);
}

TEST(ReportHtml, EscapesTextFromTheRun) {
  const std::string html = report_html(sample_run());
  EXPECT_EQ(html.find(kScript), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#39;single&#39; &quot;double&quot;"),
            std::string::npos);
  EXPECT_EQ(html.find("<fun>"), std::string::npos);
  EXPECT_NE(html.find("(&gt; 10%) &amp; more"), std::string::npos);
}

TEST(ReportHtml, IsSelfContainedAndComplete) {
  const RunResult run = sample_run();
  const std::string html = report_html(run);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_NE(html.find(">fail<"), std::string::npos);
  EXPECT_NE(html.find("#cf222e"), std::string::npos);  // the verdict's red
  EXPECT_NE(html.find("stories260K"), std::string::npos);
  EXPECT_NE(html.find("aaaaaaaa"), std::string::npos);
  EXPECT_NE(html.find("01234567"), std::string::npos);
  EXPECT_EQ(html.find("0123456789"), std::string::npos);  // sha256s are cut to 8 hex digits
  for (const ScenarioResult& s : run.scenarios) EXPECT_NE(html.find("Scenario " + s.name), std::string::npos);
  for (const GateResult& g : run.gates) {
    std::string why;  // as the page must show it: & < > escaped
    for (char c : g.why) why += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : std::string(1, c);
    EXPECT_NE(html.find(why), std::string::npos) << g.why;
    EXPECT_NE(html.find(">" + g.scenario + "<"), std::string::npos) << g.scenario;
    EXPECT_NE(html.find(">" + g.metric + "<"), std::string::npos) << g.metric;
  }
  EXPECT_NE(html.find(">inconclusive<"), std::string::npos);
  EXPECT_NE(html.find(">pass<"), std::string::npos);
  // The skipped gate is in the table with its why, marked optional, with each gate's method.
  EXPECT_NE(html.find(">skipped<"), std::string::npos);
  EXPECT_NE(html.find("1 skipped"), std::string::npos);
  EXPECT_NE(html.find(">optional<"), std::string::npos);
  EXPECT_NE(html.find("<td>wilson</td>"), std::string::npos);
  EXPECT_NE(html.find("nats/byte"), std::string::npos);
  EXPECT_NE(html.find("recorded reference: run 7's candidate arm"), std::string::npos);
  // mia's two flipped items are listed with both outputs; cat has none.
  EXPECT_NE(html.find("2 items online got right and the candidate got wrong"), std::string::npos);
  EXPECT_NE(html.find("0 items online got right"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
}

TEST(ReportHtml, FoldsLongFlipListsAndSurvivesEmptyRuns) {
  RunResult run = sample_run();
  ArmResult& candidate = run.scenarios[0].arms["candidate"];
  ArmResult& online = run.scenarios[0].arms["online"];
  online.items = make_items("mia", "online", std::vector<int>(40, 1), 11);
  candidate.items = make_items("mia", "candidate", std::vector<int>(40, 0), 14);
  const std::string html = report_html(run);
  EXPECT_NE(html.find("40 items online got right"), std::string::npos);
  EXPECT_NE(html.find("<summary>30 more</summary>"), std::string::npos);

  const std::string empty = report_html(RunResult{});
  EXPECT_NE(empty.find(">inconclusive<"), std::string::npos);
  EXPECT_NE(empty.find("No gates were applied."), std::string::npos);
}

// The screenshot must differ from a blank page's: Chromium compresses a
// uniform 1200x2000 screenshot of any colour to about the same ~11 kB, so a
// page that rendered text, tables and charts is several times that size.
TEST(ReportRender, HeadlessChromiumDrawsThePage) {
  const char* chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium)) GTEST_SKIP() << chromium << " not installed (scripts/setup.sh installs it)";
  const std::string dir = loragate::testing::make_temp_dir("lg-report");
  ASSERT_FALSE(dir.empty());
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name, std::ios::binary) << text;
  };
  write("report.html", report_html(sample_run()));
  write("blank.html", "<!DOCTYPE html><html><body></body></html>");
  const auto shoot = [&](const std::string& name) -> std::string {
    const std::string png = dir + "/" + name + ".png";
    const std::string cmd = std::string("timeout 120 ") + chromium +
                            " --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1"
                            " --user-data-dir=" +
                            dir + "/profile --window-size=1200,2000 --screenshot=" + png + " file://" + dir + "/" +
                            name + ".html >" + dir + "/" + name + ".log 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << " (see " << dir << "/" << name << ".log)";
    std::ifstream in(png, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string report = shoot("report");
  const std::string blank = shoot("blank");
  ASSERT_GT(report.size(), 33u);
  ASSERT_EQ(report.compare(0, 8, "\x89PNG\r\n\x1a\n"), 0);
  ASSERT_EQ(report.compare(12, 4, "IHDR"), 0);
  const auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(report[at])) << 24) | (uint32_t(uint8_t(report[at + 1])) << 16) |
           (uint32_t(uint8_t(report[at + 2])) << 8) | uint32_t(uint8_t(report[at + 3]));
  };
  EXPECT_EQ(be32(16), 1200u);
  EXPECT_EQ(be32(20), 2000u);
  ASSERT_GT(blank.size(), 0u);
  EXPECT_GT(report.size(), 4 * blank.size())
      << "the report's screenshot is hardly larger than a blank page's: " << dir << "/report.png";
  // Kept for a look when something failed; a passing run leaves nothing behind.
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate::eval

// The HTML report's layout (report.h, report_gates.h): read first the
// verdict and the gates that decided it, then the charts, then every gate
// folded; and the slack that ranks the gates nearest their bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "evaluator/report.h"
#include "evaluator/report_gates.h"
#include "tests/evaluator/report_fixtures.h"

namespace loragate::eval {
namespace {

using namespace report_fixtures;

// Read first: the verdict, what decided it (the failing gate before the
// passing ones, nearest bounds first), then the charts, then every gate
// folded, skipped gates folded apart with their reason; a table of contents.
TEST(ReportHtml, ReadsVerdictThenDecidingGatesThenChartsThenEveryGate) {
  const RunResult run = sample_run();
  const std::string html = report_html(run);
  const size_t toc = html.find("<nav class=\"toc\">"), verdict = html.find("class=\"verdict\"");
  const size_t deciding = html.find("id=\"deciding\""), base = html.find("id=\"base-quality\"");
  const size_t scenario = html.find("id=\"scenario-" + run.scenarios[0].name + "\"");
  const size_t every = html.find("id=\"gates\"");
  ASSERT_NE(toc, std::string::npos);
  EXPECT_NE(html.find("href=\"#deciding\""), std::string::npos);
  EXPECT_LT(toc, verdict);
  EXPECT_LT(verdict, deciding);
  EXPECT_LT(deciding, base);
  EXPECT_LT(base, scenario);
  EXPECT_LT(scenario, every);
  // Every gate's table is folded; the skipped gate sits in its own fold, named by its reason.
  EXPECT_NE(html.find("<details><summary>", every), std::string::npos);
  for (const GateResult& g : run.gates) {
    if (g.verdict != Verdict::kSkipped) continue;
    EXPECT_NE(html.find("skipped: " + g.why.substr(0, 20), every), std::string::npos) << g.why;
  }
  // In the deciding table the failing gate comes first.
  const size_t first_fail = html.find(">fail<", deciding), first_pass = html.find(">pass<", deciding);
  ASSERT_NE(first_fail, std::string::npos);
  EXPECT_LT(first_fail, first_pass);
}

TEST(ReportHtml, SlackIsTheShareOfTheMarginAnIntervalKeepsFromItsBound) {
  GateResult drop;  // max_drop 0.05: the low end -0.03 keeps 0.02 of 0.05 = 40%
  drop.rule = "max_drop";
  drop.margin = 0.05;
  drop.low = -0.03;
  drop.high = 0.01;
  drop.verdict = Verdict::kPass;
  EXPECT_NEAR(report_detail::gate_slack(drop), 0.4, 1e-12);
  GateResult rise = drop;  // max_rise_rel 0.10 with high 0.15: 50% past it
  rise.rule = "max_rise_rel";
  rise.margin = 0.10;
  rise.low = 0.12;
  rise.high = 0.15;
  EXPECT_NEAR(report_detail::gate_slack(rise), -0.5, 1e-12);
  GateResult floor = drop;  // floor 0.5 with low 0.6: 20% above
  floor.rule = "floor";
  floor.margin = 0.5;
  floor.low = 0.6;
  EXPECT_NEAR(report_detail::gate_slack(floor), 0.2, 1e-12);
  floor.verdict = Verdict::kSkipped;
  EXPECT_TRUE(std::isnan(report_detail::gate_slack(floor)));
}

}  // namespace
}  // namespace loragate::eval

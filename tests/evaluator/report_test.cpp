// Tests of evaluator/report.h: the JSON's shape and values, the round trip
// through run_from_json, the HTML's escaping and self-containment, and a
// headless Chromium rendering of the page (skipped without /usr/bin/chromium).
#include "evaluator/report.h"
#include "evaluator/report_gates.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace loragate::eval {
namespace {

using nlohmann::json;

constexpr const char* kScript = "<script>alert(1)</script>";

// Items of one arm: `right[i]` decides keyword success; texts and timings vary
// by item so that every field has a distinct value to compare.
std::vector<ItemResult> make_items(const std::string& scenario, const std::string& arm, const std::vector<int>& right,
                                   double ttft_base) {
  std::vector<ItemResult> items;
  for (size_t i = 0; i < right.size(); ++i) {
    ItemResult it;
    it.id = scenario + "-00" + std::to_string(i);
    it.generated_ids = {1, static_cast<int32_t>(100 + i), static_cast<int32_t>(200 + i), arm == "online" ? 7 : 8};
    it.continuation_text = " Once " + arm + " told story " + std::to_string(i) + " & \"it\" was <fun>.";
    it.compared_text = it.continuation_text.substr(0, 20);
    it.keyword = right[i];
    it.exact_match = right[i] && i % 2 == 0;
    it.rougeL_f1 = 0.5 + 0.07 * static_cast<double>(i) + (arm == "online" ? 0.01 : 0.0);
    it.token_f1 = it.rougeL_f1 - 0.02;
    it.nll_sum = 1.25 + 0.5 * static_cast<double>(i);
    it.n_ref_tokens = 20 + static_cast<int64_t>(i);
    it.ttft_ms = ttft_base + 1.7 * static_cast<double>((i * 5) % 7);
    it.tpot_ms = 0.8 + 0.11 * static_cast<double>((i * 3) % 5);
    items.push_back(it);
  }
  return items;
}

// A cheap stand-in for metrics.h's aggregate(): the report only copies these.
ArmMetrics summarise(const std::vector<ItemResult>& items, double agreement, int64_t flips) {
  ArmMetrics m;
  m.n_items = static_cast<int64_t>(items.size());
  double nll = 0;
  for (const ItemResult& it : items) {
    m.keyword_rate += it.keyword;
    m.exact_match_rate += it.exact_match;
    m.rougeL_f1 += it.rougeL_f1;
    m.token_f1 += it.token_f1;
    nll += it.nll_sum;
    m.n_ref_tokens += it.n_ref_tokens;
  }
  const double n = static_cast<double>(items.size());
  m.keyword_rate /= n, m.exact_match_rate /= n, m.rougeL_f1 /= n, m.token_f1 /= n;
  m.nll_mean = nll / static_cast<double>(m.n_ref_tokens);
  m.perplexity = std::exp(m.nll_mean);
  m.agreement = agreement;
  m.negative_flips = flips;
  m.ttft_p50_ms = items[0].ttft_ms, m.ttft_p99_ms = items.back().ttft_ms + 3;
  m.tpot_p50_ms = items[0].tpot_ms, m.tpot_p99_ms = items.back().tpot_ms + 0.2;
  return m;
}

ArmResult make_arm(const std::string& scenario, const std::string& arm, const std::vector<int>& right, double ttft,
                   double agreement, int64_t flips) {
  ArmResult a;
  a.arm = arm;
  const bool online_base = arm.rfind("online", 0) == 0;
  a.base = online_base ? "stories260K" : "candidate-good";
  a.base_sha256 = online_base ? std::string(64, 'a') : "0123456789abcdef" + std::string(48, 'c');
  if (arm.find("no_adapter") == std::string::npos) {
    a.adapter = "adapters/" + a.base + "/" + scenario;
    a.adapter_sha256 = std::string(64, arm == "online" ? '1' : '2');
  }
  a.items = make_items(scenario, arm, right, ttft);
  a.metrics = summarise(a.items, agreement, flips);
  return a;
}

GateResult gate(const std::string& scenario, const std::string& metric, const std::string& against,
                const std::string& rule, Verdict v, double est, double low, double high, double margin,
                const std::string& why) {
  GateResult g;
  g.scenario = scenario, g.metric = metric, g.against = against, g.rule = rule, g.verdict = v;
  g.estimate = est, g.low = low, g.high = high, g.margin = margin, g.why = why;
  g.method = "paired_bootstrap", g.n = 40;
  return g;
}

// 3 scenarios; mia has two flips (one with a script tag as its output) and a
// copied-adapter arm; gates of every verdict; the run fails on base quality.
RunResult sample_run() {
  RunResult run;
  run.id = 42;
  run.started_at = 1764576000;
  run.online_base = "stories260K";
  run.online_sha256 = std::string(64, 'a');
  run.candidate_base = "candidate-good";
  run.candidate_sha256 = "0123456789abcdef" + std::string(48, 'c');
  run.suite_path = "configs/eval/suite.yaml";
  run.suite_text = "scenarios:\n  - name: mia\n";
  run.suite_sha256 = std::string(64, 'd');
  run.gates_text = "gates:\n  keyword_rate: {max_drop: 0.05}\n";
  run.gates_sha256 = std::string(64, 'e');
  run.seed = 18446744073709551557ull;  // above INT64_MAX: must stay unsigned
  for (const std::string name : {"mia", "cat", "sunny"}) {
    ScenarioResult s;
    s.name = name;
    const std::vector<int> online_right = {1, 1, 1, 1, 1, 0};
    const std::vector<int> candidate_right = name == "mia" ? std::vector<int>{1, 0, 1, 0, 1, 1} : online_right;
    s.arms["online"] = make_arm(name, "online", online_right, 11, 1, 0);
    s.arms["candidate"] = make_arm(name, "candidate", candidate_right, 14, 0.5, name == "mia" ? 2 : 0);
    s.arms["online_no_adapter"] = make_arm(name, "online_no_adapter", {0, 0, 1, 0, 0, 0}, 9, 0.2, 4);
    s.arms["candidate_no_adapter"] = make_arm(name, "candidate_no_adapter", {0, 0, 0, 0, 0, 0}, 10, 0.1, 5);
    if (name == "mia") {
      s.arms["copied_adapter"] = make_arm(name, "copied_adapter", {1, 1, 0, 1, 1, 0}, 13, 0.4, 1);
      s.arms["candidate"].items[1].continuation_text = std::string(" ") + kScript + " & 'single' \"double\"";
    }
    run.scenarios.push_back(std::move(s));
  }
  for (const std::string arm : {"online", "candidate"}) {
    GenericResult g;
    g.arm = arm;
    for (int r = 0; r < 32; ++r) {
      g.row_nll_sum.push_back((arm == "online" ? 155.0 : 190.0) + r * 0.25);
      g.row_tokens.push_back(127);
    }
    g.nll_mean = arm == "online" ? 1.2092 : 1.4864;
    g.perplexity = std::exp(g.nll_mean);
    run.generic.push_back(std::move(g));
  }
  run.gates = {
      gate("mia", "keyword_rate", "online", "max_drop", Verdict::kInconclusive, -0.333, -0.667, 0.0, 0.05,
           "the interval reaches below -0.05"),
      gate("mia", "exact_match_rate", "online", "max_drop", Verdict::kPass, 0.0, -0.02, 0.02, 0.1,
           "drop at most 0.02 < 0.1"),
      gate("cat", "rougeL_f1", "online", "max_drop", Verdict::kPass, -0.01, -0.03, 0.01, 0.05, "within margin"),
      gate("cat", "nll_mean", "online", "max_rise_rel", Verdict::kPass, 0.01, -0.02, 0.04, 0.1, "rise < 10%"),
      gate("sunny", "keyword_rate", "absolute", "floor", Verdict::kPass, 0.833, 0.6, 1.0, 0.5, "above the floor"),
      gate("generic", "perplexity", "online", "max_rise_rel", Verdict::kFail, 0.3193, 0.28, 0.36, 0.1,
           "perplexity rose 32% (> 10%) & more"),
      gate("mia", "ttft_p90", "online", "max_rise_rel", Verdict::kSkipped, std::nan(""), std::nan(""),
           std::nan(""), 0.5, "candidate ttft_p90 max_rise_rel: biased: measured beside live traffic"),
  };
  run.gates[3].unit = "nats/byte";
  run.gates[4].method = "wilson";
  run.gates.back().method = "", run.gates.back().unit = "ms", run.gates.back().n = 0;
  run.gates.back().optional = true;
  run.recorded_run_id = 7;
  run.recorded_arm = "candidate";
  run.online_tokenizer_sha256 = std::string(64, '1');
  run.candidate_tokenizer_sha256 = std::string(64, '2');
  run.latency_biased = true;
  ItemResult& cut = run.scenarios[1].arms["candidate"].items[2];
  cut.unfinished = "cancelled";
  cut.unscored = "the reference was cut at the context length";
  cut.reference_bytes = 57;
  cut.order = 1;
  run.generic[0].row_bytes.assign(run.generic[0].row_nll_sum.size(), 512);
  run.verdict = Verdict::kFail;
  return run;
}

void expect_metrics(const json& j, const ArmMetrics& m) {
  EXPECT_EQ(j.at("n_items"), m.n_items);
  EXPECT_EQ(j.at("keyword_rate"), m.keyword_rate);
  EXPECT_EQ(j.at("exact_match_rate"), m.exact_match_rate);
  EXPECT_EQ(j.at("rougeL_f1"), m.rougeL_f1);
  EXPECT_EQ(j.at("token_f1"), m.token_f1);
  EXPECT_EQ(j.at("nll_mean"), m.nll_mean);
  EXPECT_EQ(j.at("perplexity"), m.perplexity);
  EXPECT_EQ(j.at("n_ref_tokens"), m.n_ref_tokens);
  EXPECT_EQ(j.at("agreement"), m.agreement);
  EXPECT_EQ(j.at("negative_flips"), m.negative_flips);
  EXPECT_EQ(j.at("ttft_p50_ms"), m.ttft_p50_ms);
  EXPECT_EQ(j.at("ttft_p99_ms"), m.ttft_p99_ms);
  EXPECT_EQ(j.at("tpot_p50_ms"), m.tpot_p50_ms);
  EXPECT_EQ(j.at("tpot_p99_ms"), m.tpot_p99_ms);
  EXPECT_EQ(j.size(), 14u);
}

void expect_item(const json& j, const ItemResult& it) {
  EXPECT_EQ(j.at("id"), it.id);
  EXPECT_EQ(j.at("generated_ids").get<std::vector<int32_t>>(), it.generated_ids);
  EXPECT_EQ(j.at("continuation_text"), it.continuation_text);
  EXPECT_EQ(j.at("compared_text"), it.compared_text);
  EXPECT_EQ(j.at("keyword"), it.keyword);
  EXPECT_EQ(j.at("exact_match"), it.exact_match);
  EXPECT_EQ(j.at("rougeL_f1"), it.rougeL_f1);
  EXPECT_EQ(j.at("token_f1"), it.token_f1);
  EXPECT_EQ(j.at("nll_sum"), it.nll_sum);
  EXPECT_EQ(j.at("n_ref_tokens"), it.n_ref_tokens);
  EXPECT_EQ(j.at("ttft_ms"), it.ttft_ms);
  EXPECT_EQ(j.at("tpot_ms"), it.tpot_ms);
  EXPECT_EQ(j.at("unfinished"), it.unfinished);
  EXPECT_EQ(j.at("unscored"), it.unscored);
  EXPECT_EQ(j.at("reference_bytes"), it.reference_bytes);
  EXPECT_EQ(j.at("order"), it.order);
}

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

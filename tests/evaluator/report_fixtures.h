// The runs the report tests build: items, arms and gates of every kind, and
// one whole run (sample_run) with a script tag among its texts; and the
// checks of a report's JSON against them. Shared by report_test.cpp and
// report_layout_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/eval_types.h"

namespace loragate::eval::report_fixtures {

using nlohmann::json;

inline constexpr const char* kScript = "<script>alert(1)</script>";

// Items of one arm: `right[i]` decides keyword success; texts and timings vary
// by item so that every field has a distinct value to compare.
inline std::vector<ItemResult> make_items(const std::string& scenario, const std::string& arm, const std::vector<int>& right,
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
inline ArmMetrics summarise(const std::vector<ItemResult>& items, double agreement, int64_t flips) {
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

inline ArmResult make_arm(const std::string& scenario, const std::string& arm, const std::vector<int>& right, double ttft,
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

inline GateResult gate(const std::string& scenario, const std::string& metric, const std::string& against,
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
inline RunResult sample_run() {
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

inline void expect_metrics(const json& j, const ArmMetrics& m) {
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

inline void expect_item(const json& j, const ItemResult& it) {
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

}  // namespace loragate::eval::report_fixtures

// The gates' rules of issue 20 on synthetic runs: min_items and Wilson on
// tiny samples, negative flips offset by fixes, latency that no floor hides,
// biased latency, nats per byte across tokenizers, rows that did not finish,
// and skipped gates that decide the run unless optional.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "evaluator/gates.h"

namespace loragate::eval {
namespace gate_rules_test {

// n items of one arm, right on every metric unless `fill` says otherwise.
ArmResult arm_of(const std::string& name, size_t n, const std::function<void(size_t, ItemResult&)>& fill) {
  ArmResult a;
  a.arm = name;
  for (size_t i = 0; i < n; ++i) {
    ItemResult it;
    it.id = "item-" + std::to_string(i);
    it.keyword = 1;
    it.exact_match = 1;
    it.rougeL_f1 = 0.9;
    it.token_f1 = 0.9;
    it.nll_sum = 2.0;
    it.n_ref_tokens = 20;
    it.reference_bytes = 50;
    fill(i, it);
    a.items.push_back(std::move(it));
  }
  return a;
}

RunResult run_of(ArmResult online, ArmResult candidate) {
  RunResult run;
  ScenarioResult s;
  s.name = "sc";
  s.arms["online"] = std::move(online);
  s.arms["candidate"] = std::move(candidate);
  run.scenarios.push_back(std::move(s));
  return run;
}

GateConfig config_of(const std::string& yaml) {
  Result<GateConfig> c = GateConfig::parse(yaml, "test", GateConfig{});
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : GateConfig{};
}

const GateResult& gate_of(const std::vector<GateResult>& gates, const std::string& metric, const std::string& rule) {
  for (const GateResult& g : gates) {
    if (g.metric == metric && g.rule == rule) return g;
  }
  ADD_FAILURE() << "no gate " << metric << " " << rule;
  static const GateResult none;
  return none;
}

// Deterministic noise in [1 - spread, 1 + spread].
class Jitter {
 public:
  explicit Jitter(double spread) : spread_(spread) {}
  double operator()() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return 1 - spread_ + 2 * spread_ * static_cast<double>(state_ >> 11) / 9007199254740992.0;
  }

 private:
  double spread_;
  uint64_t state_ = 42;
};

auto keep = [](size_t, ItemResult&) {};

TEST(GateRules, TooFewItemsCannotPassButAFailureStaysOne) {
  const RunResult three = run_of(arm_of("online", 3, keep), arm_of("candidate", 3, keep));
  const auto gates = evaluate_gates(config_of("adapter: {keyword_rate: {floor: 0.8}}\n"), three, {});
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_EQ(gates[0].verdict, Verdict::kInconclusive);
  EXPECT_EQ(gates[0].n, 3);
  EXPECT_NE(gates[0].why.find("3 items, fewer than min_items 30"), std::string::npos) << gates[0].why;
  EXPECT_EQ(overall_verdict(gates), Verdict::kInconclusive);

  // Even allowed 10 items, 10/10 has a Wilson low end of 0.72: not shown above 0.80.
  const RunResult ten = run_of(arm_of("online", 10, keep), arm_of("candidate", 10, keep));
  const auto wilson = evaluate_gates(config_of("adapter: {keyword_rate: {floor: 0.8, min_items: 5}}\n"), ten, {});
  ASSERT_EQ(wilson.size(), 1u);
  EXPECT_EQ(wilson[0].verdict, Verdict::kInconclusive);
  EXPECT_EQ(wilson[0].method, "wilson");
  EXPECT_NEAR(wilson[0].low, 0.7225, 1e-4);
  EXPECT_NE(wilson[0].why.find("95% Wilson CI 0.722..1.000, 10 items) may be below floor 0.8"), std::string::npos)
      << wilson[0].why;
  // Too few items never turn a measured failure into "inconclusive": 0 of 12 is wholly below 0.80.
  const RunResult missed = run_of(arm_of("online", 12, keep), arm_of("candidate", 12, [](size_t, ItemResult& it) {
                                    it.keyword = 0;
                                  }));
  const auto failed = evaluate_gates(config_of("adapter: {keyword_rate: {floor: 0.8}}\n"), missed, {});
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].verdict, Verdict::kFail) << failed[0].why;
  EXPECT_NE(failed[0].why.find("(on 12 items, fewer than min_items 30)"), std::string::npos) << failed[0].why;
  EXPECT_EQ(overall_verdict(failed), Verdict::kFail);
  // 40/40 clears it.
  const RunResult forty = run_of(arm_of("online", 40, keep), arm_of("candidate", 40, keep));
  EXPECT_EQ(evaluate_gates(config_of("adapter: {keyword_rate: {floor: 0.8}}\n"), forty, {})[0].verdict,
            Verdict::kPass);
}

// Online right on items 0..34; the candidate loses 0..4 and gains 35..39.
RunResult churned(size_t flips, size_t fixes) {
  return run_of(arm_of("online", 40, [](size_t i, ItemResult& it) { it.keyword = i < 35 ? 1 : 0; }),
                arm_of("candidate", 40, [&](size_t i, ItemResult& it) {
                  it.keyword = i < 35 ? (i < flips ? 0 : 1) : (i - 35 < fixes ? 1 : 0);
                }));
}

TEST(GateRules, FlipsOffsetByFixesFail) {
  const RunResult run = churned(5, 5);
  GateConfig config = GateConfig::defaults();
  config.adapter.keyword_rate.max_drop = 0.20;  // wide enough to pass 10 discordant items of 40
  const auto gates = evaluate_gates(config, run, {});
  const GateResult& drop = gate_of(gates, "keyword_rate", "max_drop");
  EXPECT_EQ(drop.verdict, Verdict::kPass) << drop.why;
  EXPECT_EQ(drop.estimate, 0.0);  // the rates are equal: 35/40 both
  const GateResult& flips = gate_of(gates, "negative_flip_rate", "max_rate");
  EXPECT_EQ(flips.verdict, Verdict::kFail) << flips.why;
  EXPECT_EQ(flips.method, "exact_binomial");
  EXPECT_EQ(flips.against, "online");
  EXPECT_EQ(flips.n, 40);
  EXPECT_DOUBLE_EQ(flips.estimate, 0.125);
  EXPECT_NEAR(flips.low, 0.04186, 1e-4);
  EXPECT_NE(flips.why.find("5 of 40 items online got right and the candidate not"), std::string::npos) << flips.why;
  EXPECT_NE(flips.why.find("5 the other way"), std::string::npos) << flips.why;
  EXPECT_NE(flips.why.find("= 0.00667: exceeds max_rate 0.03"), std::string::npos) << flips.why;
  EXPECT_EQ(overall_verdict(gates), Verdict::kFail);

  // The default margin: no flip or one passes, a few are inconclusive.
  const auto verdict = [](size_t flips_made) {
    return gate_of(evaluate_gates(GateConfig::defaults(), churned(flips_made, 0), {}), "negative_flip_rate",
                   "max_rate")
        .verdict;
  };
  EXPECT_EQ(verdict(0), Verdict::kPass);
  EXPECT_EQ(verdict(1), Verdict::kPass);
  EXPECT_EQ(verdict(3), Verdict::kInconclusive);
  EXPECT_EQ(verdict(5), Verdict::kFail);
}

// Flips count "right" as ArmMetrics::negative_flips does: exact match for items without a keyword rule.
TEST(GateRules, FlipsUseExactMatchWithoutKeywordRule) {
  const RunResult run = run_of(arm_of("online", 40, [](size_t, ItemResult& it) { it.keyword = -1; }),
                               arm_of("candidate", 40, [](size_t i, ItemResult& it) {
                                 it.keyword = -1;
                                 it.exact_match = i < 6 ? 0 : 1;
                               }));
  const auto gates = evaluate_gates(config_of("adapter: {negative_flip_rate: {max_rate: 0.03}}\n"), run, {});
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_DOUBLE_EQ(gates[0].estimate, 6.0 / 40);
  EXPECT_EQ(gates[0].verdict, Verdict::kFail);
}

TEST(GateRules, LatencyRiseMustExceedBothBounds) {
  Jitter jitter(0.1);
  // 1 -> 4.9 ms per output token: what the old 5 ms clamp hid.
  const RunResult slow = run_of(arm_of("online", 40, [&](size_t, ItemResult& it) { it.tpot_ms = 1.0 * jitter(); }),
                                arm_of("candidate", 40, [&](size_t, ItemResult& it) { it.tpot_ms = 4.9 * jitter(); }));
  const auto gates = evaluate_gates(GateConfig::defaults(), slow, {});
  const GateResult& tpot = gate_of(gates, "tpot_p90", "max_rise_rel");
  EXPECT_EQ(tpot.verdict, Verdict::kFail) << tpot.why;
  EXPECT_EQ(tpot.method, "paired_bootstrap");
  EXPECT_EQ(tpot.unit, "ms");
  EXPECT_EQ(tpot.n, 40);
  // The other gates of the run are unaffected; latency is optional only when skipped.
  EXPECT_EQ(overall_verdict(gates), Verdict::kFail);

  // +100% but +0.2 ms: timer noise at these sizes, within min_abs_rise_ms.
  const RunResult tiny = run_of(arm_of("online", 40, [&](size_t, ItemResult& it) { it.ttft_ms = 0.2 * jitter(); }),
                                arm_of("candidate", 40, [&](size_t, ItemResult& it) { it.ttft_ms = 0.4 * jitter(); }));
  const auto tiny_gates = evaluate_gates(GateConfig::defaults(), tiny, {});
  const GateResult& ttft = gate_of(tiny_gates, "ttft_p90", "max_rise_rel");
  EXPECT_EQ(ttft.verdict, Verdict::kPass) << ttft.why;
  EXPECT_GT(ttft.low, 0.5);  // the relative rise alone would have failed
  EXPECT_NE(ttft.why.find("within max_rise_rel 50% or min_abs_rise_ms 0.5 ms"), std::string::npos) << ttft.why;

  // Descheduling spikes of +10 ms on 5 and 7 items of each arm (a busy machine):
  // the p90 sits at their edge and cannot be bounded, so the gate is
  // inconclusive, and being optional it informs without holding the run.
  const RunResult noisy = run_of(
      arm_of("online", 40, [&](size_t i, ItemResult& it) { it.ttft_ms = jitter() + (i % 9 == 0 ? 10 : 0); }),
      arm_of("candidate", 40, [&](size_t i, ItemResult& it) { it.ttft_ms = jitter() + (i % 6 == 0 ? 10 : 0); }));
  const auto loud = evaluate_gates(config_of("latency: {optional: true, ttft_p90: {max_rise_rel: 0.5, "
                                             "min_abs_rise_ms: 0.5}}\nadapter: {keyword_rate: {max_drop: 0.1}}\n"),
                                   noisy, {});
  EXPECT_EQ(gate_of(loud, "ttft_p90", "max_rise_rel").verdict, Verdict::kInconclusive)
      << gate_of(loud, "ttft_p90", "max_rise_rel").why;
  EXPECT_EQ(overall_verdict(loud), Verdict::kPass);

  // Measured beside live traffic: every latency gate is skipped as biased.
  RunResult biased = slow;
  biased.latency_biased = true;
  for (const GateResult& g : evaluate_gates(GateConfig::defaults(), biased, {})) {
    if (g.metric.rfind("ttft", 0) != 0 && g.metric.rfind("tpot", 0) != 0) continue;
    EXPECT_EQ(g.verdict, Verdict::kSkipped) << g.metric;
    EXPECT_EQ(g.why.rfind("biased: ", 0), 0u) << g.why;
    EXPECT_TRUE(g.optional);
  }
}

TEST(GateRules, DifferingTokenizersCompareNatsPerByte) {
  // Per token both arms are 0.1 nats; per byte 2/50 = 0.04 against 3/50 = 0.06.
  RunResult run = run_of(arm_of("online", 40, keep), arm_of("candidate", 40, [](size_t, ItemResult& it) {
                           it.nll_sum = 3.0;
                           it.n_ref_tokens = 30;
                         }));
  const GateConfig config = config_of("adapter: {nll_mean: {max_rise: 0.01}}\n");
  const GateResult per_token = evaluate_gates(config, run, {})[0];
  EXPECT_EQ(per_token.unit, "nats/token");
  EXPECT_NEAR(per_token.estimate, 0.0, 1e-12);
  EXPECT_EQ(per_token.verdict, Verdict::kPass);

  run.online_tokenizer_sha256 = std::string(64, 'a');
  run.candidate_tokenizer_sha256 = std::string(64, 'b');
  const GateResult per_byte = evaluate_gates(config, run, {})[0];
  EXPECT_EQ(per_byte.unit, "nats/byte");
  EXPECT_NEAR(per_byte.estimate, 3.0 * 40 / (50.0 * 40) - 2.0 * 40 / (50.0 * 40), 1e-12);
  EXPECT_EQ(per_byte.verdict, Verdict::kFail);
  EXPECT_NE(per_byte.why.find("candidate nll_mean (nats/byte) 0.06 vs online 0.04"), std::string::npos)
      << per_byte.why;

  // The same tokenizer: per token again, unless nll_unit says byte.
  run.candidate_tokenizer_sha256 = run.online_tokenizer_sha256;
  EXPECT_EQ(evaluate_gates(config, run, {})[0].unit, "nats/token");
  EXPECT_EQ(evaluate_gates(config_of("nll_unit: byte\nadapter: {nll_mean: {max_rise: 0.01}}\n"), run, {})[0].unit,
            "nats/byte");

  // Bytes not recorded when they are needed: skipped, never a per-token figure in disguise.
  run.scenarios[0].arms["online"].items[4].reference_bytes = 0;
  const GateResult no_bytes =
      evaluate_gates(config_of("nll_unit: byte\nadapter: {nll_mean: {max_rise: 0.01}}\n"), run, {})[0];
  EXPECT_EQ(no_bytes.verdict, Verdict::kSkipped);
  EXPECT_NE(no_bytes.why.find("reference bytes not recorded"), std::string::npos) << no_bytes.why;

  // The generic set weighs its rows by row_bytes.
  RunResult generic;
  for (const char* arm : {"online", "candidate"}) {
    GenericResult g;
    g.arm = arm;
    for (int r = 0; r < 32; ++r) {
      g.row_nll_sum.push_back(std::string(arm) == "online" ? 100.0 : 120.0);
      g.row_tokens.push_back(std::string(arm) == "online" ? 50 : 80);
      g.row_bytes.push_back(200);
    }
    generic.generic.push_back(g);
  }
  generic.online_tokenizer_sha256 = "a";
  generic.candidate_tokenizer_sha256 = "b";
  const GateResult rows = evaluate_gates(config_of("generic: {nll_mean: {max_rise: 0.2}}\n"), generic, {})[0];
  EXPECT_EQ(rows.unit, "nats/byte");
  EXPECT_NEAR(rows.estimate, 120.0 / 200 - 100.0 / 200, 1e-12);
  EXPECT_EQ(rows.n, 32);

  // A generic row scored in one arm only is not counted as 0: the gate is inconclusive.
  generic.generic[1].row_tokens[5] = 0;
  const GateResult failed_row = evaluate_gates(config_of("generic: {nll_mean: {max_rise: 0.2}}\n"), generic, {})[0];
  EXPECT_EQ(failed_row.verdict, Verdict::kInconclusive);
  EXPECT_EQ(failed_row.why, "1 row was not scored in full (first: candidate 5: no tokens scored)");
}

TEST(GateRules, RowsThatDidNotFinishAreInconclusive) {
  RunResult run = run_of(arm_of("online", 40, keep), arm_of("candidate", 40, [](size_t i, ItemResult& it) {
                           if (i == 3) it.unfinished = "cancelled";
                           if (i == 7) it.unfinished = "engine error: out of KV blocks";
                           it.keyword = i == 3 || i == 7 ? 0 : 1;  // as a runner that scored them would
                         }));
  const GateConfig config = config_of(
      "adapter: {keyword_rate: {max_drop: 0.1}, exact_match_rate: {max_drop: 0.15}, rougeL_f1: {max_drop: 0.05},"
      " nll_mean: {max_rise: 0.05}, negative_flip_rate: {max_rate: 0.03}}\n"
      "latency: {ttft_p90: {max_rise_rel: 0.5}}\n");
  for (ItemResult& it : run.scenarios[0].arms["online"].items) it.ttft_ms = 1;
  for (ItemResult& it : run.scenarios[0].arms["candidate"].items) it.ttft_ms = 1;
  const auto gates = evaluate_gates(config, run, {});
  for (const char* metric : {"keyword_rate", "exact_match_rate", "rougeL_f1", "negative_flip_rate", "ttft_p90"}) {
    const GateResult* g = nullptr;
    for (const GateResult& x : gates) g = x.metric == metric ? &x : g;
    ASSERT_NE(g, nullptr) << metric;
    EXPECT_EQ(g->verdict, Verdict::kInconclusive) << metric;
    EXPECT_TRUE(std::isnan(g->estimate)) << metric;  // never scored as 0
    EXPECT_EQ(g->why, "2 items did not finish (first: candidate item-3: cancelled)") << metric;
  }
  EXPECT_EQ(gate_of(gates, "nll_mean", "max_rise").verdict, Verdict::kPass);

  // A reference not scored in full spoils the NLL gates only.
  RunResult unscored = run_of(arm_of("online", 40, [](size_t i, ItemResult& it) {
                                if (i == 9) it.unscored = "the reference was cut at the context length";
                              }),
                              arm_of("candidate", 40, keep));
  const auto nll = evaluate_gates(config, unscored, {});
  const GateResult& rise = gate_of(nll, "nll_mean", "max_rise");
  EXPECT_EQ(rise.verdict, Verdict::kInconclusive);
  EXPECT_EQ(rise.why, "1 item was not scored in full (first: reference item-9: the reference was cut at the "
                      "context length)");
  EXPECT_EQ(gate_of(nll, "keyword_rate", "max_drop").verdict, Verdict::kPass);
}

TEST(GateRules, SkippedGatesAreListedAndDecideUnlessOptional) {
  RunResult run = run_of(arm_of("online", 40, keep), arm_of("candidate", 40, keep));
  run.scenarios[0].arms.erase("candidate");
  const auto gates = evaluate_gates(config_of("adapter: {keyword_rate: {floor: 0.8, max_drop: 0.1}}\n"), run, {});
  ASSERT_EQ(gates.size(), 2u);
  for (const GateResult& g : gates) {
    EXPECT_EQ(g.verdict, Verdict::kSkipped);
    EXPECT_EQ(g.why, "no candidate arm");
    EXPECT_FALSE(g.optional);
  }
  EXPECT_EQ(gates[0].against, "absolute");
  EXPECT_EQ(gates[1].against, "online");
  EXPECT_EQ(overall_verdict(gates), Verdict::kInconclusive);

  // An optional metric that cannot be judged does not hold back a passing run.
  RunResult f1 = run_of(arm_of("online", 40, [](size_t, ItemResult& it) { it.token_f1 = 0; }),
                        arm_of("candidate", 40, [](size_t, ItemResult& it) { it.token_f1 = 0; }));
  const std::string yaml = "adapter: {keyword_rate: {max_drop: 0.1}, token_f1: {max_drop: 0.05, optional: OPT}}\n";
  const auto required = evaluate_gates(config_of(std::string(yaml).replace(yaml.find("OPT"), 3, "false")), f1, {});
  EXPECT_EQ(overall_verdict(required), Verdict::kInconclusive);
  const auto optional = evaluate_gates(config_of(std::string(yaml).replace(yaml.find("OPT"), 3, "true")), f1, {});
  EXPECT_EQ(gate_of(optional, "token_f1", "max_drop").verdict, Verdict::kSkipped);
  EXPECT_TRUE(gate_of(optional, "token_f1", "max_drop").optional);
  EXPECT_EQ(overall_verdict(optional), Verdict::kPass);
}

TEST(GateRules, OverallVerdictWithSkippedGates) {
  auto gate = [](Verdict v, bool optional, const std::string& metric = "keyword_rate") {
    GateResult g;
    g.scenario = "sc";
    g.metric = metric;
    g.verdict = v;
    g.optional = optional;
    return g;
  };
  EXPECT_EQ(overall_verdict({gate(Verdict::kPass, false), gate(Verdict::kSkipped, true)}), Verdict::kPass);
  EXPECT_EQ(overall_verdict({gate(Verdict::kPass, false), gate(Verdict::kSkipped, false)}), Verdict::kInconclusive);
  EXPECT_EQ(overall_verdict({gate(Verdict::kFail, false), gate(Verdict::kSkipped, false)}), Verdict::kFail);
  // Base quality has its own rule: a skipped no-adapter gate beside a judged one does not decide.
  EXPECT_EQ(overall_verdict({gate(Verdict::kPass, false), gate(Verdict::kSkipped, false, "no_adapter.perplexity")}),
            Verdict::kPass);
  // An optional gate that is inconclusive informs but does not hold the run; failing, it fails it.
  EXPECT_EQ(overall_verdict({gate(Verdict::kPass, false), gate(Verdict::kInconclusive, true)}), Verdict::kPass);
  EXPECT_EQ(overall_verdict({gate(Verdict::kPass, false), gate(Verdict::kInconclusive, false)}),
            Verdict::kInconclusive);
  EXPECT_EQ(overall_verdict({gate(Verdict::kPass, false), gate(Verdict::kFail, true)}), Verdict::kFail);
  // Nothing judged at all shows nothing.
  EXPECT_EQ(overall_verdict({gate(Verdict::kSkipped, true)}), Verdict::kInconclusive);
}

}  // namespace gate_rules_test
}  // namespace loragate::eval

// evaluate_gates: walks a run's sections and scenarios, pairs the arms each
// section compares, and hands every configured metric to the judge
// (judge.cpp) or says why it cannot be judged; and the overall verdict. The
// config lives in gate_config.cpp, the metric table in gate_table.h.
#include "evaluator/gates.h"

#include <utility>

#include "evaluator/gate_series.h"
#include "evaluator/gate_table.h"
#include "evaluator/judge.h"

namespace loragate::eval {
namespace gates_detail {
namespace {

// The words and data of one section on one scenario.
struct Section {
  Section(std::string scenario_name, std::string prefix, std::string against_what, std::string suffix,
          std::string reference, bool is_optional)
      : scenario(std::move(scenario_name)), metric_prefix(std::move(prefix)), against(std::move(against_what)),
        what_suffix(std::move(suffix)), reference_name(std::move(reference)), optional(is_optional) {}
  std::string scenario;
  std::string metric_prefix;   // "no_adapter." or ""
  std::string against;         // "online" or "recorded"
  std::string what_suffix;     // " without adapters", " on the generic set"
  std::string reference_name;  // "online", "recorded candidate (run 7)"
  std::string count_word = "items";
  bool optional = false;
  const std::vector<ItemResult>* candidate = nullptr;
  const std::vector<ItemResult>* reference = nullptr;
  std::string not_judged;      // non-empty: every gate of the section is skipped for this reason
};

struct Walk {
  const GateConfig& config;
  Judge& judge;
  bool per_byte;  // NLL in nats per byte
};

std::string nll_words(const MetricSpec& spec, bool per_byte) {
  if (std::string(spec.name) == "perplexity") return per_byte ? " (per byte)" : " (per token)";
  return per_byte ? " (nats/byte)" : " (nats/token)";
}

template <typename Gates, size_t N>
void judge_section(Walk& w, const Gates& gates, const MetricKey<Gates> (&table)[N], const Section& s) {
  for (const auto& m : table) {
    const MetricGate& gate = gates.*m.gate;
    if (!gate.any()) continue;
    Comparison c;
    c.scenario = s.scenario;
    c.metric = s.metric_prefix + m.spec.name;
    c.against = s.against;
    c.what = std::string("candidate ") + m.spec.name + s.what_suffix + (m.spec.nll ? nll_words(m.spec, w.per_byte) : "");
    c.reference_name = s.reference_name;
    c.count_word = s.count_word;
    c.unit = m.spec.nll ? (w.per_byte ? "nats/byte" : "nats/token") : m.spec.format == Format::kMs ? "ms" : "";
    c.spec = &m.spec;
    c.gate = gate;
    c.optional = s.optional || gate.optional;
    c.min_items = gate.min_items.value_or(w.config.min_items);
    if (!s.not_judged.empty()) {
      w.judge.unjudged(c, Verdict::kSkipped, s.not_judged);
      continue;
    }
    const ItemPairs pairs = pair_items(*s.candidate, *s.reference);
    const std::string unfinished = unfinished_rows(pairs, m.spec.uses, s.count_word);
    if (!unfinished.empty()) {
      w.judge.unjudged(c, Verdict::kInconclusive, unfinished);
      continue;
    }
    const MetricSeries series = build_series(m.spec, pairs, w.per_byte);
    if (!series.missing.empty()) {
      w.judge.unjudged(c, Verdict::kSkipped, series.missing);
      continue;
    }
    w.judge.judge(c, series.candidate, series.reference);
  }
}

// Sets the section's arms, or why it has none.
void pick_arms(Section& s, const ArmResult* candidate, const ArmResult* reference, const char* candidate_name,
               const char* reference_name) {
  if (candidate == nullptr || reference == nullptr) {
    if (s.not_judged.empty()) s.not_judged = std::string("no ") + (candidate == nullptr ? candidate_name : reference_name) + " arm";
    return;
  }
  s.candidate = &candidate->items;
  s.reference = &reference->items;
}

// Why the recorded reference cannot be used at all ("" = it can).
std::string recorded_unusable(const RecordedReference& r, const RunResult& run) {
  if (r.run == nullptr) return "no recorded run given";
  if (r.run->suite_sha256 != run.suite_sha256) {
    return "the recorded run" + (r.run->id > 0 ? " (run " + std::to_string(r.run->id) + ")" : std::string()) +
           " measured another suite";
  }
  return "";
}

size_t judged_since(const Judge& judge, size_t before) {
  size_t n = 0;
  for (size_t i = before; i < judge.results().size(); ++i) n += judge.results()[i].verdict != Verdict::kSkipped;
  return n;
}

bool is_base_quality(const GateResult& g) {
  return g.scenario == "generic" || g.metric.rfind("no_adapter.", 0) == 0;
}

}  // namespace
}  // namespace gates_detail

// --- verdicts ---------------------------------------------------------------------------

Verdict judge_at_least(const Interval& interval, double bound) {
  if (interval.low >= bound) return Verdict::kPass;
  if (interval.high < bound) return Verdict::kFail;
  return Verdict::kInconclusive;  // straddles the bound, or NaN
}

Verdict judge_at_most(const Interval& interval, double bound) {
  if (interval.high <= bound) return Verdict::kPass;
  if (interval.low > bound) return Verdict::kFail;
  return Verdict::kInconclusive;
}

std::vector<GateResult> evaluate_gates(const GateConfig& config, const RunResult& run,
                                       const RecordedReference& reference) {
  using namespace gates_detail;
  Judge judge(config.bootstrap);
  const bool tokenizers_differ = !run.online_tokenizer_sha256.empty() && !run.candidate_tokenizer_sha256.empty() &&
                                 run.online_tokenizer_sha256 != run.candidate_tokenizer_sha256;
  Walk w{config, judge, config.nll_unit == NllUnit::kByte || tokenizers_differ};
  size_t base_quality_judged = 0;
  const std::string recorded_problem = recorded_unusable(reference, run);
  const std::string recorded_name =
      "recorded " + reference.arm +
      (reference.run != nullptr && reference.run->id > 0 ? " (run " + std::to_string(reference.run->id) + ")" : "");

  for (const ScenarioResult& s : run.scenarios) {
    const ArmResult* online = find_arm(s, "online");
    const ArmResult* candidate = find_arm(s, "candidate");

    Section adapter(s.name, "", "online", "", "online", config.adapter.optional);
    pick_arms(adapter, candidate, online, "candidate", "online");
    judge_section(w, config.adapter, kScenarioMetrics, adapter);

    if (section_has_rules(config.recorded, kScenarioMetrics)) {
      Section recorded(s.name, "", "recorded", "", recorded_name, config.recorded.optional);
      recorded.not_judged = recorded_problem;
      const ArmResult* previous = nullptr;
      if (recorded_problem.empty()) {
        for (const ScenarioResult& r : reference.run->scenarios) {
          if (r.name == s.name) previous = find_arm(r, reference.arm);
        }
        if (candidate != nullptr && previous == nullptr) {
          recorded.not_judged = "the recorded run has no " + reference.arm + " arm for this scenario";
        }
      }
      pick_arms(recorded, candidate, previous, "candidate", "recorded");
      judge_section(w, config.recorded, kScenarioMetrics, recorded);
    }

    Section bare(s.name, "no_adapter.", "online", " without adapters", "online", config.no_adapter.optional);
    pick_arms(bare, find_arm(s, "candidate_no_adapter"), find_arm(s, "online_no_adapter"), "candidate_no_adapter",
              "online_no_adapter");
    const size_t before = judge.results().size();
    judge_section(w, config.no_adapter, kScenarioMetrics, bare);
    base_quality_judged += judged_since(judge, before);

    Section latency(s.name, "", "online", "", "online", config.latency.optional);
    if (run.latency_biased) {
      latency.not_judged = "biased: the arms' latencies were measured under different scheduling (inside a "
                           "server, beside live traffic), so they compare the scheduler, not the bases";
    }
    pick_arms(latency, candidate, online, "candidate", "online");
    judge_section(w, config.latency, kLatencyMetrics, latency);
  }

  const GenericResult* generic_online = find_generic(run, "online");
  const GenericResult* generic_candidate = find_generic(run, "candidate");
  std::vector<ItemResult> online_rows = generic_online ? generic_rows(*generic_online) : std::vector<ItemResult>{};
  std::vector<ItemResult> candidate_rows =
      generic_candidate ? generic_rows(*generic_candidate) : std::vector<ItemResult>{};
  // A row scored in one arm only failed in the other: the gates say so rather than count it as 0.
  for (size_t i = 0; i < online_rows.size() && i < candidate_rows.size(); ++i) {
    ItemResult& o = online_rows[i];
    ItemResult& c = candidate_rows[i];
    if ((o.n_ref_tokens > 0) == (c.n_ref_tokens > 0)) continue;
    (o.n_ref_tokens > 0 ? c : o).unscored = "no tokens scored";
  }
  Section generic("generic", "", "online", " on the generic set", "online", config.generic.optional);
  generic.count_word = "rows";
  generic.candidate = &candidate_rows;
  generic.reference = &online_rows;
  if (generic_online == nullptr || generic_candidate == nullptr) {
    generic.not_judged = "no generic set scored";
  } else if (online_rows.size() != candidate_rows.size()) {
    generic.not_judged = "the arms scored different rows (" + std::to_string(candidate_rows.size()) + " vs " +
                         std::to_string(online_rows.size()) + ")";
  }
  const size_t before = judge.results().size();
  judge_section(w, config.generic, kGenericMetrics, generic);
  base_quality_judged += judged_since(judge, before);

  // Retrained adapters hide a damaged base (candidate-bad scores keyword 1.000
  // with them), so a run that could not look at base quality must not pass.
  if ((section_has_rules(config.no_adapter, kScenarioMetrics) || section_has_rules(config.generic, kGenericMetrics)) &&
      base_quality_judged == 0) {
    GateResult g;
    g.scenario = "generic";
    g.metric = "base_quality";
    g.against = "online";
    g.rule = "required";
    g.verdict = Verdict::kInconclusive;
    g.estimate = g.low = g.high = kNoEstimate;
    g.why = "no base-quality data (no generic set scored, no arms without adapters): scenario metrics after "
            "retraining cannot show a damaged base";
    judge.add(std::move(g));
  }
  return judge.take();
}

Verdict overall_verdict(const std::vector<GateResult>& gates) {
  Verdict worst = Verdict::kPass;
  bool judged = false;
  for (const GateResult& g : gates) {
    if (g.verdict == Verdict::kFail) return Verdict::kFail;
    // An optional gate informs: it fails the run when it fails, but its lack of evidence holds nothing back.
    if (g.verdict == Verdict::kInconclusive && !g.optional) worst = Verdict::kInconclusive;
    if (g.verdict != Verdict::kSkipped) judged = true;
    // A required gate that never ran showed nothing; base quality has its own "base_quality" gate.
    if (g.verdict == Verdict::kSkipped && !g.optional && !gates_detail::is_base_quality(g)) {
      worst = Verdict::kInconclusive;
    }
  }
  return judged ? worst : Verdict::kInconclusive;
}

}  // namespace loragate::eval

// report_html: one self-contained page per run, built top to bottom in the
// order a person reads it: the verdict, the gates that decided it, the bases
// judged on their own, then each scenario (bars, latency, flipped items).
// Everything from the run goes through html_escape; the page has no scripts
// and no URLs, so it can be mailed, archived and opened offline.
#include <cmath>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "evaluator/report.h"
#include "evaluator/report_gates.h"
#include "evaluator/report_svg.h"

namespace loragate::eval {
namespace {

using namespace report_detail;

constexpr const char* kCss = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2328;
  max-width:1160px;margin:0 auto;padding:16px 20px 40px;background:#fff}
h1{font-size:22px;margin:0}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
.verdict{color:#fff;border-radius:8px;padding:18px 22px;margin:8px 0 12px}
.verdict .word{font-size:52px;font-weight:800;letter-spacing:2px;line-height:1}
.verdict .bases{font-size:17px;margin-top:8px}.verdict code{background:rgba(255,255,255,.2);padding:1px 5px;border-radius:4px}
.verdict ul{margin:8px 0 0;padding-left:20px}
.meta{color:#57606a;font-size:13px}code{font:12px ui-monospace,"DejaVu Sans Mono",monospace}
table{border-collapse:collapse;margin:6px 0;font-size:13px}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.path{overflow-wrap:anywhere;max-width:240px}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;color:#fff;border-radius:10px;padding:0 8px;font-weight:600;font-size:12px}
.chart text{font:12px system-ui,"DejaVu Sans",sans-serif;fill:#1f2328}.chart .m{font-weight:600}
.chart .ax{fill:#6e7781;font-size:11px}.chart .v{font-variant-numeric:tabular-nums}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:-1px}
.out{white-space:pre-wrap;font:12px ui-monospace,"DejaVu Sans Mono",monospace;max-width:480px}
.scores{color:#57606a;font-size:12px}.lat{display:flex;flex-wrap:wrap;gap:8px}
.toc{margin:6px 0;font-size:13px}details{margin:6px 0}summary{cursor:pointer;font-weight:600}
)";

// Arm colours: blue / orange for the two sides, lighter tints without adapter.
const char* arm_colour(const std::string& arm) {
  if (arm == "online") return "#4c72b0";
  if (arm == "candidate") return "#dd8452";
  if (arm == "online_no_adapter") return "#a5b9dc";
  if (arm == "candidate_no_adapter") return "#efc0a2";
  return "#8172b3";  // copied_adapter and anything else
}

// The number in a table: fewer decimals for large values such as milliseconds.
std::string num(double v) { return fmt(v, std::fabs(v) >= 100 ? 1 : 3); }

std::string utc_time(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// "Right" as negative_flips counts it: the keyword rule when the item has
// one, else exact match.
bool right(const ItemResult& it) { return it.keyword != -1 ? it.keyword == 1 : it.exact_match == 1; }

const GateResult* find_gate(const RunResult& run, const std::string& scenario, const std::string& metric) {
  for (const GateResult& g : run.gates)
    if (g.scenario == scenario && g.metric == metric) return &g;
  return nullptr;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The gate's interval on the candidate's scale (see report.h); false when
// the interval is not finite.
bool gate_interval(const GateResult& g, double online, double candidate, double* low, double* high) {
  if (!std::isfinite(g.low) || !std::isfinite(g.high)) return false;
  if (g.against == "absolute") {
    *low = g.low, *high = g.high;
  } else if (ends_with(g.rule, "_rel")) {
    const double ref = g.against == "online" ? online : candidate / (1 + g.estimate);
    *low = ref * (1 + g.low), *high = ref * (1 + g.high);
  } else {
    const double ref = g.against == "online" ? online : candidate - g.estimate;
    *low = ref + g.low, *high = ref + g.high;
  }
  return std::isfinite(*low) && std::isfinite(*high);
}

double metric_value(const ArmMetrics& m, const std::string& metric) {
  if (metric == "keyword_rate") return m.keyword_rate;
  if (metric == "exact_match_rate") return m.exact_match_rate;
  if (metric == "rougeL_f1") return m.rougeL_f1;
  if (metric == "token_f1") return m.token_f1;
  if (metric == "nll_mean") return m.nll_mean;
  return m.perplexity;
}

// Online and candidate bars of one metric; the candidate gets the whisker of
// the gate on that metric. Perplexity also takes a gate on nll_mean, through exp.
BarRow bar_row(const RunResult& run, const std::string& scenario, const ArmMetrics* online, const ArmMetrics* candidate,
               const std::string& metric, double axis_max) {
  BarRow row{metric, {}, axis_max, 3};
  if (online) row.bars.push_back({"online", arm_colour("online"), metric_value(*online, metric)});
  if (!candidate) return row;
  Bar bar{"candidate", arm_colour("candidate"), metric_value(*candidate, metric)};
  const GateResult* g = find_gate(run, scenario, metric);
  bool via_nll = false;
  if (!g && metric == "perplexity") {
    g = find_gate(run, scenario, "nll_mean");
    via_nll = g != nullptr;
  }
  if (g) {
    const std::string m = via_nll ? "nll_mean" : metric;
    double low = 0, high = 0;
    if (gate_interval(*g, online ? metric_value(*online, m) : 0, metric_value(*candidate, m), &low, &high)) {
      bar.whisker = true;
      bar.low = via_nll ? std::exp(low) : low;
      bar.high = via_nll ? std::exp(high) : high;
    }
  }
  row.bars.push_back(bar);
  return row;
}

std::string verdict_section(const RunResult& run) {
  std::map<Verdict, int> counts;
  for (const GateResult& g : run.gates) ++counts[g.verdict];
  std::string h = std::string("<div class=\"verdict\" style=\"background:") + verdict_colour(run.verdict) + "\">";
  h += std::string("<div class=\"word\">") + verdict_name(run.verdict) + "</div>";
  h += "<div class=\"bases\">candidate <b>" + html_escape(run.candidate_base) + "</b> <code>" +
       html_escape(short_sha(run.candidate_sha256)) + "</code> against online <b>" + html_escape(run.online_base) +
       "</b> <code>" + html_escape(short_sha(run.online_sha256)) + "</code></div>";
  h += "<div>" + std::to_string(run.gates.size()) + " gates: " + std::to_string(counts[Verdict::kPass]) + " pass, " +
       std::to_string(counts[Verdict::kFail]) + " fail, " + std::to_string(counts[Verdict::kInconclusive]) +
       " inconclusive, " + std::to_string(counts[Verdict::kSkipped]) + " skipped</div>";
  // What decided the verdict: the failing gates, then the required gates that
  // were inconclusive or skipped (optional ones hold nothing back).
  constexpr int kReasons = 6;
  std::string reasons;
  int shown = 0, undecided = 0;
  for (Verdict v : {Verdict::kFail, Verdict::kInconclusive, Verdict::kSkipped}) {
    for (const GateResult& g : run.gates) {
      if (g.verdict != v || (v != Verdict::kFail && g.optional)) continue;
      ++undecided;
      if (shown == kReasons) continue;
      ++shown;
      reasons += "<li><b>" + std::string(verdict_name(v)) + "</b> " + html_escape(g.scenario) + " / " +
                 html_escape(g.metric) + ": " + html_escape(g.why) + "</li>";
    }
  }
  if (undecided > kReasons)
    reasons += "<li>and " + std::to_string(undecided - kReasons) + " more below</li>";
  if (!reasons.empty()) h += "<ul>" + reasons + "</ul>";
  h += "</div>";
  h += "<p class=\"meta\">run " + std::to_string(run.id) + " &middot; started " + utc_time(run.started_at) +
       " &middot; suite <code>" + html_escape(run.suite_path) + "</code> <code>" +
       html_escape(short_sha(run.suite_sha256)) + "</code> &middot; gates <code>" +
       html_escape(short_sha(run.gates_sha256)) + "</code> &middot; seed " + std::to_string(run.seed) +
       (run.recorded_run_id > 0 ? " &middot; recorded reference: run " + std::to_string(run.recorded_run_id) + "'s " +
                                      html_escape(run.recorded_arm) + " arm"
                                : std::string()) +
       "</p>";
  return h;
}

std::string base_quality_section(const RunResult& run) {
  std::string h = "<h2 id=\"base-quality\">Base quality</h2><h3>Generic held-out perplexity (no adapter)</h3>";
  const GenericResult* online = nullptr;
  const GenericResult* candidate = nullptr;
  for (const GenericResult& g : run.generic) {
    if (g.arm == "online") online = &g;
    if (g.arm == "candidate") candidate = &g;
  }
  if (run.generic.empty()) {
    h += "<p>This suite has no generic set.</p>";
  } else {
    BarRow row{"perplexity", {}, 0, 3};
    ArmMetrics om, cm;  // the generic figures in ArmMetrics clothes, for bar_row
    if (online) om.perplexity = online->perplexity, om.nll_mean = online->nll_mean;
    if (candidate) cm.perplexity = candidate->perplexity, cm.nll_mean = candidate->nll_mean;
    h += svg_metric_bars({bar_row(run, "generic", online ? &om : nullptr, candidate ? &cm : nullptr, "perplexity", 0)});
    h += "<table><tr><th>arm</th><th>base</th><th>rows</th><th>tokens</th><th>nll_mean</th><th>perplexity</th>"
         "<th>vs online</th></tr>";
    for (const GenericResult& g : run.generic) {
      int64_t tokens = 0;
      for (int64_t t : g.row_tokens) tokens += t;
      const std::string base = g.arm == "online" ? run.online_base : g.arm == "candidate" ? run.candidate_base : "";
      const std::string rel =
          online && online->perplexity > 0 ? fmt_signed(100 * (g.perplexity / online->perplexity - 1), 1) + "%" : "-";
      h += "<tr>" + td(html_escape(g.arm)) + td(html_escape(base)) + td(std::to_string(g.row_nll_sum.size()), true) +
           td(std::to_string(tokens), true) + td(fmt(g.nll_mean, 4), true) + td(fmt(g.perplexity, 3), true) +
           td(rel, true) + "</tr>";
    }
    h += "</table>";
  }
  // A retrained adapter can hide a worse base; the bare bases show it.
  h += "<h3>Scenarios without adapter</h3><table><tr><th>scenario</th><th>arm</th><th>keyword_rate</th>"
       "<th>exact_match_rate</th><th>rougeL_f1</th><th>token_f1</th><th>perplexity</th></tr>";
  bool any = false;
  for (const ScenarioResult& s : run.scenarios) {
    for (const char* arm : {"online_no_adapter", "candidate_no_adapter"}) {
      auto it = s.arms.find(arm);
      if (it == s.arms.end()) continue;
      any = true;
      const ArmMetrics& m = it->second.metrics;
      h += "<tr>" + td(html_escape(s.name)) + td(arm) + td(num(m.keyword_rate), true) +
           td(num(m.exact_match_rate), true) + td(num(m.rougeL_f1), true) + td(num(m.token_f1), true) +
           td(num(m.perplexity), true) + "</tr>";
    }
  }
  if (!any) h += "<tr><td colspan=\"7\">No arms without adapter were run.</td></tr>";
  return h + "</table>";
}

std::string arms_table(const ScenarioResult& s) {
  std::string h =
      "<table><tr><th>arm</th><th>base</th><th>adapter</th><th>n</th><th>keyword</th><th>EM</th>"
      "<th>ROUGE&#8209;L</th><th>token F1</th><th>nll_mean</th><th>ppl</th><th>agree&shy;ment</th>"
      "<th>neg. flips</th><th>TTFT ms<br>p50 / p99</th><th>TPOT ms<br>p50 / p99</th></tr>";
  for (const char* name : {"online", "candidate", "copied_adapter", "online_no_adapter", "candidate_no_adapter"}) {
    auto it = s.arms.find(name);
    if (it == s.arms.end()) continue;
    const ArmResult& a = it->second;
    const ArmMetrics& m = a.metrics;
    h += "<tr>" + td(html_escape(a.arm)) + "<td>" + html_escape(a.base) + " <code>" +
         html_escape(short_sha(a.base_sha256)) + "</code></td>" + "<td class=\"path\">" +
         (a.adapter.empty() ? "-" : html_escape(a.adapter)) + "</td>" + td(std::to_string(m.n_items), true) +
         td(num(m.keyword_rate), true) + td(num(m.exact_match_rate), true) + td(num(m.rougeL_f1), true) +
         td(num(m.token_f1), true) + td(fmt(m.nll_mean, 4), true) + td(num(m.perplexity), true) +
         td(num(m.agreement), true) + td(std::to_string(m.negative_flips), true) +
         td(fmt(m.ttft_p50_ms, 1) + " / " + fmt(m.ttft_p99_ms, 1), true) +
         td(fmt(m.tpot_p50_ms, 2) + " / " + fmt(m.tpot_p99_ms, 2), true) + "</tr>";
  }
  return h + "</table>";
}

std::string latency_plots(const ArmResult* online, const ArmResult* candidate) {
  std::vector<Series> ttft, tpot;
  for (const ArmResult* a : {online, candidate}) {
    if (!a) continue;
    Series t{a->arm, arm_colour(a->arm), {}, {}}, p = t;
    for (const ItemResult& it : a->items) {
      t.values.push_back(it.ttft_ms), t.ids.push_back(it.id);
      p.values.push_back(it.tpot_ms), p.ids.push_back(it.id);
    }
    ttft.push_back(std::move(t)), tpot.push_back(std::move(p));
  }
  if (ttft.empty()) return "";
  return "<h3>Latency per item</h3><div class=\"lat\">" + svg_box_strip("time to first token", "ms", ttft) +
         svg_box_strip("time per output token", "ms", tpot) + "</div>";
}

std::string output_cell(const ItemResult& it) {
  std::string scores = "keyword " + (it.keyword == -1 ? std::string("-") : std::to_string(it.keyword)) +
                       " &middot; EM " + std::to_string(it.exact_match) + " &middot; ROUGE-L " + fmt(it.rougeL_f1, 3) +
                       " &middot; token F1 " + fmt(it.token_f1, 3);
  return "<td><div class=\"out\">" + html_escape(it.continuation_text) + "</div><div class=\"scores\">" + scores +
         "</div></td>";
}

// Items online got right and the candidate not, both outputs side by side;
// the first ones in view, the rest folded so that a bad run stays readable.
std::string flips_section(const ArmResult* online, const ArmResult* candidate) {
  if (!online || !candidate) return "";
  std::map<std::string, const ItemResult*> by_id;
  for (const ItemResult& it : online->items) by_id[it.id] = &it;
  std::vector<std::pair<const ItemResult*, const ItemResult*>> flips;
  int fixed = 0;
  for (const ItemResult& c : candidate->items) {
    auto it = by_id.find(c.id);
    if (it == by_id.end()) continue;
    if (right(*it->second) && !right(c)) flips.push_back({it->second, &c});
    if (!right(*it->second) && right(c)) ++fixed;
  }
  std::string h = "<h3>Flipped items</h3><p>" + std::to_string(flips.size()) +
                  " items online got right and the candidate got wrong; " + std::to_string(fixed) +
                  " the other way round.</p>";
  if (flips.empty()) return h;
  constexpr size_t kShown = 10;
  const std::string head = "<table><tr><th>item</th><th>online</th><th>candidate</th></tr>";
  h += head;
  for (size_t i = 0; i < flips.size(); ++i) {
    if (i == kShown)
      h += "</table><details><summary>" + std::to_string(flips.size() - kShown) + " more</summary>" + head;
    h += "<tr>" + td("<code>" + html_escape(flips[i].first->id) + "</code>") + output_cell(*flips[i].first) +
         output_cell(*flips[i].second) + "</tr>";
  }
  h += "</table>";
  if (flips.size() > kShown) h += "</details>";
  return h;
}

std::string scenario_section(const RunResult& run, const ScenarioResult& s) {
  const auto arm = [&](const char* name) -> const ArmResult* {
    auto it = s.arms.find(name);
    return it == s.arms.end() ? nullptr : &it->second;
  };
  const ArmResult* online = arm("online");
  const ArmResult* candidate = arm("candidate");
  std::string h = "<h2 id=\"scenario-" + html_escape(s.name) + "\">Scenario " + html_escape(s.name) + "</h2>";
  std::string badges;
  for (const GateResult& g : run.gates)
    if (g.scenario == s.name) badges += badge(g.verdict) + " " + html_escape(g.metric) + " &nbsp; ";
  if (!badges.empty()) h += "<p>" + badges + "</p>";
  if (online || candidate) {
    const ArmMetrics* om = online ? &online->metrics : nullptr;
    const ArmMetrics* cm = candidate ? &candidate->metrics : nullptr;
    std::vector<BarRow> rows;
    for (const char* metric : {"keyword_rate", "exact_match_rate", "rougeL_f1", "token_f1"})
      rows.push_back(bar_row(run, s.name, om, cm, metric, 1.0));
    rows.push_back(bar_row(run, s.name, om, cm, "perplexity", 0));
    h += "<div class=\"legend\"><span style=\"background:" + std::string(arm_colour("online")) +
         "\"></span>online <span style=\"background:" + arm_colour("candidate") +
         "\"></span>candidate &nbsp; whiskers: the gate's interval on the candidate's scale</div>";
    h += svg_metric_bars(rows);
  }
  h += arms_table(s);
  bool latency_judged = false;  // plots of latencies no gate could judge (biased, or too few) only mislead
  for (const GateResult& g : run.gates) {
    const bool latency = g.metric.rfind("ttft_", 0) == 0 || g.metric.rfind("tpot_", 0) == 0;
    latency_judged = latency_judged || (g.scenario == s.name && latency && g.verdict != Verdict::kSkipped);
  }
  if (latency_judged) h += latency_plots(online, candidate);
  h += flips_section(online, candidate);
  return h;
}

}  // namespace

std::string report_html(const RunResult& run) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  h += "<title>loragate evaluation: " + std::string(verdict_name(run.verdict)) + " - " +
       html_escape(run.candidate_base) + " against " + html_escape(run.online_base) + "</title>";
  h += "<style>" + std::string(kCss) + "</style></head><body>";
  h += "<h1>Base-model evaluation</h1>";
  // What a person reads first: the verdict, what decided it, then the charts, then everything.
  h += "<nav class=\"toc\"><a href=\"#deciding\">deciding gates</a> &middot; <a href=\"#base-quality\">base "
       "quality</a>";
  for (const ScenarioResult& s : run.scenarios) {
    h += " &middot; <a href=\"#scenario-" + html_escape(s.name) + "\">" + html_escape(s.name) + "</a>";
  }
  h += " &middot; <a href=\"#gates\">every gate</a></nav>";
  h += verdict_section(run);
  h += deciding_gates_html(run);
  h += base_quality_section(run);
  for (const ScenarioResult& s : run.scenarios) h += scenario_section(run, s);
  h += all_gates_html(run);
  h += "</body></html>\n";
  return h;
}

}  // namespace loragate::eval

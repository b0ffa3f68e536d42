#include "evaluator/report_gates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "evaluator/report_svg.h"

namespace loragate::eval::report_detail {
namespace {

// A row of the full table: every field.
std::string gate_row(const GateResult& g) {
  const std::string unit = g.unit.empty() ? "" : " " + html_escape(g.unit);
  const std::string verdict = badge(g.verdict) + (g.optional ? " <span class=\"meta\">optional</span>" : "");
  return "<tr>" + td(verdict) + td(html_escape(g.scenario)) + td(html_escape(g.metric)) + td(html_escape(g.against)) +
         td(html_escape(g.rule)) + td(fmt_signed(g.estimate, 4) + unit, true) +
         td("[" + fmt(g.low, 4) + ", " + fmt(g.high, 4) + "]", true) +
         td(g.method.empty() ? "-" : html_escape(g.method)) + td(std::to_string(g.n), true) +
         td(fmt(g.margin, 4), true) + td(html_escape(g.why)) + "</tr>";
}

std::string table_head() {
  return "<table><tr><th>verdict</th><th>scenario</th><th>metric</th><th>against</th><th>rule</th>"
         "<th>estimate</th><th>interval</th><th>method</th><th>n</th><th>margin</th><th>why</th></tr>";
}

// A row of the deciding table: the few fields that say how near, and the why
// line beneath them across the row, so neither is squeezed.
std::string deciding_row(const GateResult& g) {
  const double slack = gate_slack(g);
  const std::string unit = g.unit.empty() ? "" : " " + html_escape(g.unit);
  return "<tr>" + td(badge(g.verdict)) + td(html_escape(g.scenario) + " / <b>" + html_escape(g.metric) + "</b>") +
         td(html_escape(g.against) + " " + html_escape(g.rule) + " " + fmt(g.margin, 4)) +
         td("[" + fmt(g.low, 4) + ", " + fmt(g.high, 4) + "]" + unit, true) +
         td(std::isnan(slack) ? "-" : fmt_signed(100 * slack, 1) + "%", true) + "</tr><tr><td></td>" +
         "<td colspan=\"4\" class=\"meta\">" + html_escape(g.why) + "</td></tr>";
}

}  // namespace

double gate_slack(const GateResult& g) {
  if (g.verdict == Verdict::kSkipped || std::isnan(g.low) || std::isnan(g.high)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  // The interval end that faces the bound, and the bound. A relative rise on
  // perplexity is judged as max_rise ln(1 + r) on nats (gates.h): that bound.
  double end = g.high, bound = g.margin;
  if (g.rule == "max_rise_rel" && g.unit.rfind("nats", 0) == 0) bound = std::log1p(g.margin);
  bool lower_bound = false;
  if (g.rule == "max_drop") end = g.low, bound = -g.margin, lower_bound = true;
  if (g.rule == "floor") end = g.low, lower_bound = true;
  const double slack = lower_bound ? end - bound : bound - end;
  const double scale = std::max(std::fabs(g.margin), 1e-9);
  return slack / scale;
}

std::string deciding_gates_html(const RunResult& run, size_t nearest) {
  std::vector<const GateResult*> open, passing;
  for (const GateResult& g : run.gates) {
    if (g.verdict == Verdict::kSkipped) continue;
    (g.verdict == Verdict::kPass ? passing : open).push_back(&g);
  }
  auto by_slack = [](const GateResult* a, const GateResult* b) { return gate_slack(*a) < gate_slack(*b); };
  std::stable_sort(open.begin(), open.end(), [](const GateResult* a, const GateResult* b) {
    return static_cast<int>(a->verdict == Verdict::kFail) > static_cast<int>(b->verdict == Verdict::kFail);
  });
  std::stable_sort(passing.begin(), passing.end(), by_slack);
  if (passing.size() > nearest) passing.resize(nearest);
  std::string h = "<h2 id=\"deciding\">The gates that decided it</h2>";
  h += "<p class=\"meta\">Every judged gate that did not pass, then the " + std::to_string(passing.size()) +
       " passing gates nearest their bounds. Slack: how far the interval's end stays inside the bound, as a share "
       "of the margin (the bound itself for floors and ceilings); negative: past it.</p>";
  if (open.empty() && passing.empty()) return h + "<p>No gate was judged.</p>";
  h += "<table><tr><th>verdict</th><th>scenario / metric</th><th>rule</th><th>interval</th><th>slack</th></tr>";
  for (const GateResult* g : open) h += deciding_row(*g);
  for (const GateResult* g : passing) h += deciding_row(*g);
  return h + "</table>";
}

std::string all_gates_html(const RunResult& run) {
  std::string h = "<h2 id=\"gates\">Every gate</h2>";
  if (run.gates.empty()) return h + "<p>No gates were applied.</p>";
  size_t judged = 0;
  std::map<std::string, std::vector<const GateResult*>> skipped;  // why -> gates
  for (const GateResult& g : run.gates) {
    if (g.verdict == Verdict::kSkipped) {
      skipped[g.why].push_back(&g);
    } else {
      ++judged;
    }
  }
  h += "<details><summary>" + std::to_string(judged) + " judged gates</summary>";
  h += "<p class=\"meta\">Estimate: candidate minus reference (the candidate's value for absolute gates), "
       "with its confidence interval by the method named; margin: the bound the gate allows; n: the items "
       "(rows) judged.</p>";
  h += table_head();
  for (const GateResult& g : run.gates) {
    if (g.verdict != Verdict::kSkipped) h += gate_row(g);
  }
  h += "</table></details>";
  for (const auto& [why, gates] : skipped) {
    h += "<details><summary>" + std::to_string(gates.size()) + " skipped: " + html_escape(why) + "</summary>";
    h += "<p class=\"meta\">A skipped gate could not be judged; unless optional it leaves the run inconclusive.</p>";
    h += table_head();
    for (const GateResult* g : gates) h += gate_row(*g);
    h += "</table></details>";
  }
  return h;
}

}  // namespace loragate::eval::report_detail

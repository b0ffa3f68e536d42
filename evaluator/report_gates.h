// The gate parts of the HTML report (report_html.cpp), in the order a person
// reads them: first the gates that decided or nearly decided the run (every
// one that did not pass, then the passing ones nearest their bounds), last
// the whole table, folded, with the skipped gates folded apart by reason.
// Internal to the evaluator's reports. Pure functions.
#pragma once

#include <string>
#include <vector>

#include "evaluator/eval_types.h"

namespace loragate::eval::report_detail {

// How far a judged gate's interval stays inside its bound, as a share of the
// bound's scale (its margin, or the bound itself for floors and ceilings):
// negative when the interval reaches past it. NaN for skipped gates.
double gate_slack(const GateResult& g);

// <h2 id="deciding"> every non-passing judged gate and the `nearest` passing
// gates of least slack.
std::string deciding_gates_html(const RunResult& run, size_t nearest = 8);

// <h2 id="gates"> the full table in a <details>, and the skipped gates folded
// by reason.
std::string all_gates_html(const RunResult& run);

}  // namespace loragate::eval::report_detail

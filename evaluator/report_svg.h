// Drawing helpers of report_html.cpp: HTML escaping, number formatting and
// two inline-SVG charts (metric bars with whiskers, box-and-strip plots).
// Internal to the evaluator's reports, not a public interface.
//
// Pure functions; safe to call from many threads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "evaluator/eval_types.h"

namespace loragate::eval::report_detail {

// Escapes & < > " ' so that `text` is inert in element content and in
// quoted attribute values.
std::string html_escape(std::string_view text);

// `v` with `decimals` digits after the point; "n/a" for NaN, "inf" / "-inf".
std::string fmt(double v, int decimals);
// The same with a sign always shown: "+0.012", "-1.5".
std::string fmt_signed(double v, int decimals);
// The first 8 hex digits of a sha256, "-" when there is none.
std::string short_sha(const std::string& sha256);
// The page's colour of a verdict: pass green, fail red, inconclusive amber, skipped grey.
const char* verdict_colour(Verdict v);
// A verdict as a coloured badge.
std::string badge(Verdict v);
// A table cell of already escaped text; numeric cells align right.
std::string td(const std::string& escaped, bool numeric = false);

// One bar of a metric row, optionally with a confidence whisker [low, high].
struct Bar {
  std::string label;   // the arm, e.g. "online"
  std::string colour;  // CSS colour
  double value = 0;
  bool whisker = false;
  double low = 0, high = 0;
};

// One metric: its bars share the axis [0, axis_max] (axis_max <= 0 picks one
// from the values and whiskers).
struct BarRow {
  std::string metric;
  std::vector<Bar> bars;
  double axis_max = 0;
  int decimals = 3;
};

// Horizontal bars, one block per row, each row on its own axis.
std::string svg_metric_bars(const std::vector<BarRow>& rows);

// The values of one arm in a distribution plot; ids label the dots (hover).
struct Series {
  std::string label;
  std::string colour;
  std::vector<double> values;
  std::vector<std::string> ids;  // same length as values, or empty
};

// A box (quartiles, median line, whiskers min..max) over every value drawn
// as a dot, one lane per series, on a shared axis from 0 in `unit`.
std::string svg_box_strip(const std::string& title, const std::string& unit, const std::vector<Series>& series);

}  // namespace loragate::eval::report_detail

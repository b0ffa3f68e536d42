// Drawing helpers of the HTML report. The charts are plain SVG strings with
// fixed pixel layouts (the page is read on screens and printed, not resized
// by scripts); every label that comes from the data is escaped.
#include "evaluator/report_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace loragate::eval::report_detail {
namespace {

// An SVG coordinate.
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// 1, 2 or 5 times a power of ten, so that about `target` steps cover `max`.
double nice_step(double max, int target) {
  if (!(max > 0) || !std::isfinite(max)) return 1;
  const double raw = max / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

// The smallest multiple of a nice step at or above max (1 when nothing is positive).
double nice_max(double max) {
  if (!(max > 0) || !std::isfinite(max)) return 1;
  const double step = nice_step(max, 5);
  return std::ceil(max / step - 1e-9) * step;
}

// numpy's "linear" quantile of sorted values.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double r = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(r)), hi = static_cast<size_t>(std::ceil(r));
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (r - static_cast<double>(lo));
}

std::string text(double x, double y, const std::string& content, const std::string& attrs = "") {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\"" + (attrs.empty() ? "" : " " + attrs) + ">" + content +
         "</text>";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line x1=\"" + px(x1) + "\" y1=\"" + px(y1) + "\" x2=\"" + px(x2) + "\" y2=\"" + px(y2) + "\" " + attrs +
         "/>";
}

std::string rect(double x, double y, double w, double h, const std::string& attrs) {
  return "<rect x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(std::max(0.0, w)) + "\" height=\"" + px(h) +
         "\" " + attrs + "/>";
}

}  // namespace

std::string html_escape(std::string_view in) {
  std::string out;
  out.reserve(in.size() + in.size() / 8);
  for (char c : in) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(double v, int decimals) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_signed(double v, int decimals) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "+inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.*f", decimals, v);
  return buf;
}

std::string short_sha(const std::string& sha256) { return sha256.empty() ? "-" : sha256.substr(0, 8); }

const char* verdict_colour(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "#1a7f37";
    case Verdict::kFail: return "#cf222e";
    case Verdict::kInconclusive: return "#b07800";
    case Verdict::kSkipped: return "#6e7781";
  }
  return "#b07800";
}

std::string svg_metric_bars(const std::vector<BarRow>& rows) {
  // Columns: metric name | arm name | bar track | value and interval.
  constexpr double kWidth = 760, kArmRight = 232, kTrackX = 240, kTrackW = 330, kValueX = 580;
  constexpr double kBarH = 16, kBarGap = 5, kRowGap = 14;
  std::string body;
  double y = 6;
  for (const BarRow& row : rows) {
    double max = row.axis_max;
    if (max <= 0) {
      for (const Bar& b : row.bars) {
        if (std::isfinite(b.value)) max = std::max(max, b.value);
        if (b.whisker && std::isfinite(b.high)) max = std::max(max, b.high);
      }
      max = nice_max(max * 1.05);
    }
    const auto x_of = [&](double v) {
      if (!std::isfinite(v)) v = v > 0 ? max : 0;
      return kTrackX + std::clamp(v / max, 0.0, 1.0) * kTrackW;
    };
    const double block_h = static_cast<double>(row.bars.size()) * (kBarH + kBarGap) - kBarGap;
    body += text(0, y + block_h / 2 - 1, html_escape(row.metric), "class=\"m\"");
    body += text(0, y + block_h / 2 + 13, "axis 0 to " + fmt(max, max < 10 ? 2 : 0), "class=\"ax\"");
    for (const Bar& b : row.bars) {
      const double cy = y + kBarH / 2;
      body += text(kArmRight, cy + 4, html_escape(b.label), "class=\"arm\" text-anchor=\"end\"");
      body += rect(kTrackX, y, kTrackW, kBarH, "fill=\"#eef0f3\"");
      body += rect(kTrackX, y, x_of(b.value) - kTrackX, kBarH, "fill=\"" + html_escape(b.colour) + "\"");
      std::string value = fmt(b.value, row.decimals);
      if (b.whisker) {
        const double x1 = x_of(b.low), x2 = x_of(b.high);
        const std::string stroke = "stroke=\"#111\" stroke-width=\"1.6\"";
        body += line(x1, cy, x2, cy, stroke);
        body += line(x1, cy - 6, x1, cy + 6, stroke);
        body += line(x2, cy - 6, x2, cy + 6, stroke);
        value += "  [" + fmt(b.low, row.decimals) + ", " + fmt(b.high, row.decimals) + "]";
      }
      body += text(kValueX, cy + 4, value, "class=\"v\"");
      y += kBarH + kBarGap;
    }
    y += kRowGap - kBarGap;
  }
  return "<svg class=\"chart\" width=\"" + px(kWidth) + "\" height=\"" + px(y + 4) + "\" viewBox=\"0 0 " + px(kWidth) +
         " " + px(y + 4) + "\" role=\"img\">" + body + "</svg>";
}

std::string svg_box_strip(const std::string& title, const std::string& unit, const std::vector<Series>& series) {
  // Two fit side by side on the page.
  constexpr double kWidth = 570, kPlotX = 100, kPlotW = 450, kTop = 24, kLane = 40, kAxisH = 30;
  double max = 0;
  for (const Series& s : series)
    for (double v : s.values)
      if (std::isfinite(v)) max = std::max(max, v);
  max = nice_max(max * 1.05);
  const auto x_of = [&](double v) { return kPlotX + std::clamp(v / max, 0.0, 1.0) * kPlotW; };
  const double height = kTop + kLane * static_cast<double>(series.size()) + kAxisH;

  std::string body = text(0, 15, html_escape(title), "class=\"m\"");
  // Grid and axis first, so the data is drawn over them.
  const double step = nice_step(max, 5);
  const double axis_y = kTop + kLane * static_cast<double>(series.size());
  for (double t = 0; t <= max + step * 1e-6; t += step) {
    body += line(x_of(t), kTop, x_of(t), axis_y, "stroke=\"#e3e6ea\"");
    body += text(x_of(t), axis_y + 15, fmt(t, step < 1 ? 2 : 0), "class=\"ax\" text-anchor=\"middle\"");
  }
  body += text(kPlotX + kPlotW, axis_y + 28, html_escape(unit), "class=\"ax\" text-anchor=\"end\"");

  for (size_t lane = 0; lane < series.size(); ++lane) {
    const Series& s = series[lane];
    const double cy = kTop + kLane * (static_cast<double>(lane) + 0.5);
    const std::string colour = html_escape(s.colour);
    body += text(kPlotX - 10, cy + 4, html_escape(s.label), "class=\"arm\" text-anchor=\"end\"");
    std::vector<double> sorted;
    for (double v : s.values)
      if (std::isfinite(v)) sorted.push_back(v);
    std::sort(sorted.begin(), sorted.end());
    if (sorted.empty()) {
      body += text(kPlotX + 4, cy + 4, "no values", "class=\"ax\"");
      continue;
    }
    const double q1 = quantile(sorted, 0.25), med = quantile(sorted, 0.5), q3 = quantile(sorted, 0.75);
    const std::string stroke = "stroke=\"" + colour + "\" stroke-width=\"1.5\"";
    body += line(x_of(sorted.front()), cy, x_of(q1), cy, stroke);
    body += line(x_of(q3), cy, x_of(sorted.back()), cy, stroke);
    body += rect(x_of(q1), cy - 10, x_of(q3) - x_of(q1), 20, "fill=\"" + colour + "\" fill-opacity=\"0.15\" " + stroke);
    body += line(x_of(med), cy - 10, x_of(med), cy + 10, "stroke=\"" + colour + "\" stroke-width=\"3\"");
    // Dots jittered vertically by index (deterministic), so equal values stay visible.
    for (size_t i = 0; i < s.values.size(); ++i) {
      if (!std::isfinite(s.values[i])) continue;
      const double jitter = (static_cast<double>((i * 7) % 9) - 4.0) * 2.0;
      const std::string tip = (i < s.ids.size() ? s.ids[i] + ": " : "") + fmt(s.values[i], 2) + " " + unit;
      body += "<circle cx=\"" + px(x_of(s.values[i])) + "\" cy=\"" + px(cy + jitter) + "\" r=\"2.8\" fill=\"" + colour +
              "\" fill-opacity=\"0.6\"><title>" + html_escape(tip) + "</title></circle>";
    }
  }
  return "<svg class=\"chart\" width=\"" + px(kWidth) + "\" height=\"" + px(height) + "\" viewBox=\"0 0 " + px(kWidth) +
         " " + px(height) + "\" role=\"img\">" + body + "</svg>";
}

std::string badge(Verdict v) {
  return std::string("<span class=\"badge\" style=\"background:") + verdict_colour(v) + "\">" + verdict_name(v) +
         "</span>";
}

std::string td(const std::string& escaped, bool numeric) {
  return std::string(numeric ? "<td class=\"n\">" : "<td>") + escaped + "</td>";
}

}  // namespace loragate::eval::report_detail

#include "cli/eval_output.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "evaluator/report.h"

namespace loragate::cli {

ProgressBar::ProgressBar() : enabled_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(int64_t done, int64_t total) {
  if (!enabled_ || total <= 0) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = done > 0 ? elapsed * static_cast<double>(total - done) / static_cast<double>(done) : 0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r[%s%s] %lld/%lld  ETA %.0f s ", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '-').c_str(), static_cast<long long>(done),
               static_cast<long long>(total), eta);
  if (done == total) std::fprintf(stderr, "\n");
}

namespace {

// Whole or not at all (a report read while it is written, or after a crash,
// is never half a page), in a folder made for it.
Status write_text(const std::string& path, const std::string& text) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  return write_file_atomic(path, text);
}

struct GateLine {
  std::string verdict, name, why;  // "fail", "mia/rougeL_f1", the gate's why line
};

// Failed and inconclusive gates one per line; skipped ones (often many, for one
// reason: no recorded run yet) counted per reason, as the report lists them
// all; then one line counting every verdict.
void print_gate_lines(const std::vector<GateLine>& gates) {
  std::map<std::string, int> count;
  std::map<std::string, std::vector<std::string>> skipped;  // why -> names
  for (const GateLine& g : gates) {
    ++count[g.verdict];
    if (g.verdict == "skipped") {
      skipped[g.why].push_back(g.name);
    } else if (g.verdict != "pass") {
      std::printf("%-12s %s: %s\n", g.verdict.c_str(), g.name.c_str(), g.why.c_str());
    }
  }
  for (const auto& [why, names] : skipped) {
    std::printf("skipped      %zu gate(s) (%s%s): %s\n", names.size(), names.front().c_str(),
                names.size() > 1 ? ", ..." : "", why.c_str());
  }
  std::printf("gates: %d passed, %d failed, %d inconclusive, %d skipped\n", count["pass"], count["fail"],
              count["inconclusive"], count["skipped"]);
}

}  // namespace

void print_gate_lines(const nlohmann::json& gates) {
  std::vector<GateLine> lines;
  for (const nlohmann::json& g : gates) {
    if (!g.is_object()) continue;
    lines.push_back({g.value("verdict", ""), g.value("scenario", "") + "/" + g.value("metric", ""), g.value("why", "")});
  }
  print_gate_lines(lines);
}

void print_summary(const eval::RunResult& run) {
  std::printf("%-10s %-22s %8s %8s %8s %8s %8s\n", "scenario", "arm", "keyword", "EM", "ROUGE-L", "ppl", "agree");
  for (const eval::ScenarioResult& s : run.scenarios) {
    for (const char* arm : {"online", "candidate", "online_no_adapter", "candidate_no_adapter", "copied_adapter"}) {
      auto it = s.arms.find(arm);
      if (it == s.arms.end()) continue;
      const eval::ArmMetrics& m = it->second.metrics;
      std::printf("%-10s %-22s %8.3f %8.3f %8.3f %8.3f %8.3f\n", s.name.c_str(), arm, m.keyword_rate,
                  m.exact_match_rate, m.rougeL_f1, m.perplexity, m.agreement);
    }
  }
  for (const eval::GenericResult& g : run.generic) {
    std::printf("generic    %-22s perplexity %.3f\n", g.arm.c_str(), g.perplexity);
  }
  std::vector<GateLine> lines;
  for (const eval::GateResult& g : run.gates) {
    lines.push_back({eval::verdict_name(g.verdict), g.scenario + "/" + g.metric, g.why});
  }
  print_gate_lines(lines);
  std::printf("verdict: %s (run %lld)\n", eval::verdict_name(run.verdict), static_cast<long long>(run.id));
}

Status write_reports(const eval::RunResult& run, const std::string& json_out, const std::string& html_out) {
  if (!json_out.empty()) {
    LG_RETURN_IF_ERROR(write_text(json_out, eval::report_json(run).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)));
  }
  if (!html_out.empty()) LG_RETURN_IF_ERROR(write_text(html_out, eval::report_html(run)));
  return Status::ok();
}

Status write_run_reports(const eval::RunResult& run, std::string json_out, std::string html_out,
                         const std::string& default_dir) {
  const std::string stem = (std::filesystem::path(default_dir) / ("run-" + std::to_string(run.id))).string();
  if (json_out.empty()) json_out = stem + ".json";
  if (html_out.empty()) html_out = stem + ".html";
  LG_RETURN_IF_ERROR(write_reports(run, json_out, html_out));
  std::printf("reports: %s (JSON), %s (HTML)\n", json_out.c_str(), html_out.c_str());
  return Status::ok();
}

}  // namespace loragate::cli

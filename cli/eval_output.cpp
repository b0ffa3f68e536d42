#include "cli/eval_output.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

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

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) return Status::io_error("cannot write " + path);
  return Status::ok();
}

}  // namespace

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
  for (const eval::GateResult& g : run.gates) {
    if (g.verdict == eval::Verdict::kPass) continue;
    std::printf("%-12s %s/%s: %s\n", eval::verdict_name(g.verdict), g.scenario.c_str(), g.metric.c_str(),
                g.why.c_str());
  }
  std::printf("verdict: %s (run %lld)\n", eval::verdict_name(run.verdict), static_cast<long long>(run.id));
}

Status write_reports(const eval::RunResult& run, const std::string& json_out, const std::string& html_out) {
  if (!json_out.empty()) {
    LG_RETURN_IF_ERROR(write_text(json_out, eval::report_json(run).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)));
  }
  if (!html_out.empty()) LG_RETURN_IF_ERROR(write_text(html_out, eval::report_html(run)));
  return Status::ok();
}

}  // namespace loragate::cli

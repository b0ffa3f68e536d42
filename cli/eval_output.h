// What `loragate eval run` and `loragate upgrade` print and write for an
// evaluation run: a progress bar on a terminal, the summary table with the
// gates that did not pass and the verdict, and the JSON / HTML reports.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "evaluator/eval_types.h"

namespace loragate::cli {

// "\r[#####-----] 120/488  ETA 12 s" on a terminal; nothing otherwise.
class ProgressBar {
 public:
  ProgressBar();
  void update(int64_t done, int64_t total);

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
};

// Per scenario and arm the metrics, the generic perplexities, every gate that
// did not pass with why, then "verdict: <v> (run <id>)".
void print_summary(const eval::RunResult& run);
// The gates of a report's JSON ("gates": [{verdict, scenario, metric, why}])
// as print_summary shows them: what did not pass, then a count per verdict.
void print_gate_lines(const nlohmann::json& gates);
// The JSON report to `json_out` and the HTML page to `html_out` ("" = not that one).
Status write_reports(const eval::RunResult& run, const std::string& json_out, const std::string& html_out);
// Both reports of a new run: where the flags say, else <default_dir>/run-<id>.json
// and .html (under the cache, never the working folder), and prints both paths.
Status write_run_reports(const eval::RunResult& run, std::string json_out, std::string html_out,
                         const std::string& default_dir);

}  // namespace loragate::cli

// What the stages of an upgrade share (upgrade_job.cpp runs them,
// upgrade_stages.cpp holds the stages from base to evaluate): the plan of one
// run and two small helpers. Internal to upgrade/.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "upgrade/evaluation_jobs.h"
#include "upgrade/retrain.h"
#include "upgrade/upgrade_job.h"

namespace loragate::eval {

// One upgrade's run, owned by its worker thread.
struct UpgradeJobs::Plan {
  UpgradeStatus status;
  UpgradeRequest request;
  std::vector<RetrainSpec> specs;  // one per step; skipped steps' are empty
  RetrainBase base;                // the candidate, once loaded
  std::chrono::steady_clock::time_point last_write;
  std::chrono::steady_clock::time_point stage_start;
  std::optional<JobStatus> final_run;  // the transfer's run, when it judged every adapter the candidate ends with
};

namespace upgrade_detail {

// "'a', 'b', 'c'"
inline std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

// Whether two paths name the same file (resolved where they exist).
inline bool same_path(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ea, eb;
  const fs::path ra = fs::weakly_canonical(a, ea), rb = fs::weakly_canonical(b, eb);
  return !ea && !eb ? ra == rb : fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
}

}  // namespace upgrade_detail
}  // namespace loragate::eval

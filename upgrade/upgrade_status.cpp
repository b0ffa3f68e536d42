#include "upgrade/upgrade_status.h"

#include <filesystem>

namespace loragate::eval {

using nlohmann::json;

std::string upgrade_steps_text(const std::vector<UpgradeStep>& steps) {
  json out = json::array();
  for (const UpgradeStep& s : steps) out.push_back(json_fields::fields_to_json(s));
  return out.dump();
}

UpgradeStatus upgrade_status_of(const UpgradeRecord& record) {
  UpgradeStatus status;
  status.record = record;
  const json steps = json::parse(record.steps, nullptr, /*allow_exceptions=*/false);
  if (steps.is_array()) {
    for (const json& s : steps) {
      UpgradeStep step;
      json_fields::fields_from_json(s, &step);
      status.steps.push_back(std::move(step));
    }
  }
  return status;
}

std::string upgrade_report_html_path(const std::string& json_path) {
  return std::filesystem::path(json_path).replace_extension(".html").string();
}

json upgrade_status_json(const UpgradeStatus& s) {
  const UpgradeRecord& r = s.record;
  json steps = json::array();
  for (const UpgradeStep& step : s.steps) steps.push_back(json_fields::fields_to_json(step));
  json j = {{"id", r.id},
            {"candidate", r.candidate},
            {"path", r.candidate_path},
            {"online", r.online_base},
            {"state", r.state},
            {"promote", r.promote},
            {"skip_untrained", r.skip_untrained},
            {"steps", steps},
            {"verdict", r.verdict.empty() ? json() : json(r.verdict)},
            {"evaluation", r.evaluation > 0 ? json(r.evaluation) : json()},
            {"report", r.report.empty() ? json() : json(r.report)},
            {"report_html", r.report.empty() ? json() : json(upgrade_report_html_path(r.report))},
            {"error", r.error.empty() ? json() : json(r.error)},
            {"started_at", r.started_at},
            {"updated_at", r.updated_at}};
  if (r.state == "evaluating" && s.eval_total > 0) j["evaluation_progress"] = {{"done", s.eval_done}, {"total", s.eval_total}};
  return j;
}

}  // namespace loragate::eval

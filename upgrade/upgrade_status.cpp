#include "upgrade/upgrade_status.h"

#include <filesystem>

namespace loragate::eval {

using nlohmann::json;

const char* upgrade_strategy_name(UpgradeStrategy s) {
  return s == UpgradeStrategy::kRetrainAll ? "retrain-all" : "transfer-first";
}

Result<UpgradeStrategy> parse_upgrade_strategy(const std::string& name) {
  if (name == "transfer-first") return UpgradeStrategy::kTransferFirst;
  if (name == "retrain-all") return UpgradeStrategy::kRetrainAll;
  return Status::invalid_argument("strategy must be transfer-first or retrain-all, got '" + name + "'");
}

namespace {

template <class T>
json list_json(const std::vector<T>& items) {
  json out = json::array();
  for (const T& item : items) out.push_back(json_fields::fields_to_json(item));
  return out;
}

template <class T>
std::vector<T> list_from(const json& j) {
  std::vector<T> out;
  if (!j.is_array()) return out;
  for (const json& e : j) {
    T item;
    json_fields::fields_from_json(e, &item);
    out.push_back(std::move(item));
  }
  return out;
}

}  // namespace

std::string upgrade_steps_text(const UpgradeStatus& status) {
  json out = {{"strategy", status.strategy}, {"stages", list_json(status.stages)}, {"steps", list_json(status.steps)}};
  if (!status.similarity.is_null()) out["similarity"] = status.similarity;
  return out.dump();
}

UpgradeStatus upgrade_status_of(const UpgradeRecord& record) {
  UpgradeStatus status;
  status.record = record;
  const json stored = json::parse(record.steps, nullptr, /*allow_exceptions=*/false);
  if (stored.is_array()) {  // before stages: the steps alone, all retrained
    status.strategy = "retrain-all";
    status.steps = list_from<UpgradeStep>(stored);
  } else if (stored.is_object()) {
    status.strategy = stored.value("strategy", status.strategy);
    status.stages = list_from<UpgradeStage>(stored.value("stages", json::array()));
    status.steps = list_from<UpgradeStep>(stored.value("steps", json::array()));
    if (stored.contains("similarity")) status.similarity = stored["similarity"];
  }
  return status;
}

std::string upgrade_report_html_path(const std::string& json_path) {
  return std::filesystem::path(json_path).replace_extension(".html").string();
}

json upgrade_status_json(const UpgradeStatus& s) {
  const UpgradeRecord& r = s.record;
  json j = {{"id", r.id},
            {"candidate", r.candidate},
            {"path", r.candidate_path},
            {"online", r.online_base},
            {"state", r.state},
            {"promote", r.promote},
            {"skip_untrained", r.skip_untrained},
            {"strategy", s.strategy},
            {"stages", list_json(s.stages)},
            {"steps", list_json(s.steps)},
            {"similarity", s.similarity},
            {"verdict", r.verdict.empty() ? json() : json(r.verdict)},
            {"evaluation", r.evaluation > 0 ? json(r.evaluation) : json()},
            {"report", r.report.empty() ? json() : json(r.report)},
            {"report_html", r.report.empty() ? json() : json(upgrade_report_html_path(r.report))},
            {"error", r.error.empty() ? json() : json(r.error)},
            {"started_at", r.started_at},
            {"updated_at", r.updated_at}};
  if (s.eval_total > 0) j["evaluation_progress"] = {{"done", s.eval_done}, {"total", s.eval_total}};
  return j;
}

}  // namespace loragate::eval

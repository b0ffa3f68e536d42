// The upgrade routes of AdminApi (admin_api.h): POST/GET /admin/upgrades,
// GET /admin/upgrades/{id}, DELETE /admin/upgrades/{id} and
// POST /admin/upgrades/{id}/cancel. The work is upgrade/upgrade_job.h's;
// here the request is read, the candidate's path confined to bases.roots (as
// POST /admin/bases does), and a finished upgrade's failing gates are read
// back from its evaluation run.
#include <cstdlib>
#include <string_view>
#include <tuple>

#include "common/path_roots.h"
#include "gateway/admin/admin_api.h"
#include "gateway/admin/admin_request.h"

namespace loragate {
namespace {

using nlohmann::json;

std::optional<ApiError> optional_bool(const json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return bad_request(std::string(key) + " must be a boolean", key);
  *out = it->get<bool>();
  return std::nullopt;
}

// "/admin/upgrades/12" and "/admin/upgrades/12/cancel" -> 12; 0 when the tail is not an id.
int64_t upgrade_id(const std::string& tail, std::string_view suffix = "") {
  std::string digits = tail;
  if (!suffix.empty()) {
    if (digits.size() <= suffix.size() || digits.compare(digits.size() - suffix.size(), suffix.size(), suffix) != 0) {
      return 0;
    }
    digits.resize(digits.size() - suffix.size());
  }
  char* end = nullptr;
  const long long id = std::strtoll(digits.c_str(), &end, 10);
  return digits.empty() || *end != '\0' || id <= 0 ? 0 : id;
}

}  // namespace

void AdminApi::install_upgrades(Router& router, const AdminGate& gate) {
  // The upgrade as JSON, with its evaluation's gates once judged (as GET /admin/evaluations/{id}).
  auto describe = [this](const eval::UpgradeStatus& status) {
    json out = eval::upgrade_status_json(status);
    if (status.record.evaluation > 0 && evaluations_ != nullptr) {
      Result<EvaluationRecord> run = evaluations_->get(status.record.evaluation);
      if (run.is_ok()) {
        const json report = json::parse(run->report, nullptr, /*allow_exceptions=*/false);
        if (!report.is_discarded()) out["gates"] = report.value("gates", json::array());
      }
    }
    return out;
  };

  router.add(http::verb::post, "/admin/upgrades", gate.guard([this, gate, describe](const std::shared_ptr<Exchange>& ex) {
    json body;
    eval::UpgradeRequest request;
    std::string dtype = "f32", suite, gates, strategy = "transfer-first";
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "candidate", &request.candidate)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "path", &request.path)) return ex->respond(e->to_response());
    if (auto e = optional_bool(body, "promote", &request.promote)) return ex->respond(e->to_response());
    if (auto e = optional_bool(body, "skip_untrained", &request.skip_untrained)) return ex->respond(e->to_response());
    if (auto e = optional_string(body, "dtype", &dtype)) return ex->respond(e->to_response());
    if (auto e = optional_string(body, "suite", &suite)) return ex->respond(e->to_response());
    if (auto e = optional_string(body, "gates", &gates)) return ex->respond(e->to_response());
    if (auto e = optional_string(body, "strategy", &strategy)) return ex->respond(e->to_response());
    Result<eval::UpgradeStrategy> chosen = eval::parse_upgrade_strategy(strategy);
    if (!chosen.is_ok()) return ex->respond(bad_request(chosen.status().message(), "strategy").to_response());
    request.strategy = *chosen;
    Result<WeightType> parsed = parse_weight_type(dtype);
    if (!parsed.is_ok()) return ex->respond(bad_request(parsed.status().message(), "dtype").to_response());
    request.dtype = *parsed;
    request.actor = actor_of(ex->request(), body);
    ex->record().base = request.candidate;
    gate.answer_off_strand(ex, [this, request, suite, gates, describe]() mutable {
      Result<std::string> real =
          resolve_inside_roots(request.path, options_.base_roots, "base model", "bases.roots");
      if (!real.is_ok()) return status_response(real.status());
      request.path = *real;
      // A suite named here instead of the configured one: inside the evaluation roots.
      for (auto [given, out, what] : {std::tuple{&suite, &request.suite_path, "suite"},
                                      std::tuple{&gates, &request.gates_path, "gates"}}) {
        if (given->empty()) continue;
        Result<std::string> p = resolve_inside_roots(*given, options_.eval_roots, what, "evaluation.roots");
        if (!p.is_ok()) return status_response(p.status());
        *out = *p;
      }
      Result<eval::UpgradeStatus> started = upgrades_->start(request);
      if (!started.is_ok()) return status_response(started.status());
      return json_response(http::status::accepted, describe(*started));
    });
  }));
  router.add(http::verb::get, "/admin/upgrades", gate.guard([this, gate, describe](const std::shared_ptr<Exchange>& ex) {
    gate.answer_off_strand(ex, [this, describe] {
      Result<std::vector<eval::UpgradeStatus>> all = upgrades_->list();
      if (!all.is_ok()) return status_response(all.status());
      json data = json::array();
      for (const eval::UpgradeStatus& s : *all) data.push_back(describe(s));
      return json_response(http::status::ok, {{"object", "list"}, {"data", data}});
    });
  }));
  router.add_prefix(http::verb::get, "/admin/upgrades/",
                    gate.guard([this, gate, describe](const std::shared_ptr<Exchange>& ex) {
                      const int64_t id = upgrade_id(tail_after(ex->request(), "/admin/upgrades/"));
                      if (id == 0) {
                        return ex->respond(bad_request("the upgrade id must be a positive integer").to_response());
                      }
                      gate.answer_off_strand(ex, [this, id, describe] {
                        Result<eval::UpgradeStatus> s = upgrades_->get(id);
                        if (!s.is_ok()) return status_response(s.status());
                        return json_response(http::status::ok, describe(*s));
                      });
                    }));
  auto cancel = [this, gate, describe](const std::shared_ptr<Exchange>& ex, int64_t id) {
    if (id == 0) return ex->respond(bad_request("the upgrade id must be a positive integer").to_response());
    gate.answer_off_strand(ex, [this, id, describe] {
      Status s = upgrades_->cancel(id);
      if (!s.is_ok()) return status_response(s);
      Result<eval::UpgradeStatus> now = upgrades_->get(id);
      if (!now.is_ok()) return status_response(now.status());
      json out = describe(*now);
      out["cancel_requested"] = true;
      return json_response(http::status::ok, out);
    });
  };
  router.add_prefix(http::verb::delete_, "/admin/upgrades/", gate.guard([cancel](const std::shared_ptr<Exchange>& ex) {
    cancel(ex, upgrade_id(tail_after(ex->request(), "/admin/upgrades/")));
  }));
  router.add_prefix(http::verb::post, "/admin/upgrades/", gate.guard([cancel](const std::shared_ptr<Exchange>& ex) {
    cancel(ex, upgrade_id(tail_after(ex->request(), "/admin/upgrades/"), "/cancel"));
  }));
}

}  // namespace loragate

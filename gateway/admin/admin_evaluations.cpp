// The evaluation routes of AdminApi (admin_api.h): POST/GET /admin/evaluations
// and GET /admin/evaluations/{id}.
#include <cstdlib>

#include "common/path_roots.h"
#include "gateway/admin/admin_api.h"
#include "gateway/admin/admin_request.h"

namespace loragate {
namespace {

using nlohmann::json;

json job_json(const eval::JobStatus& j) {
  json out = {{"id", j.id},       {"candidate", j.candidate}, {"online", j.online}, {"state", j.state},
              {"done", j.done},   {"total", j.total}};
  if (!j.verdict.empty()) out["verdict"] = j.verdict;
  if (j.run_id > 0) out["run"] = j.run_id;
  if (!j.error.empty()) out["error"] = j.error;
  return out;
}

}  // namespace

void AdminApi::install_evaluations(Router& router, const AdminGate& gate) {
  router.add(http::verb::post, "/admin/evaluations", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    json body;
    std::string candidate, suite, gates;
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "candidate", &candidate)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "suite", &suite)) return ex->respond(e->to_response());
    if (auto e = optional_string(body, "gates", &gates)) return ex->respond(e->to_response());
    gate.answer_off_strand(ex, [this, candidate, suite, gates] {
      Result<std::string> suite_path = resolve_inside_roots(suite, options_.eval_roots, "suite", "evaluation.roots");
      if (!suite_path.is_ok()) return status_response(suite_path.status());
      std::string gates_path;
      if (!gates.empty()) {
        Result<std::string> g = resolve_inside_roots(gates, options_.eval_roots, "gates", "evaluation.roots");
        if (!g.is_ok()) return status_response(g.status());
        gates_path = *g;
      }
      // The files the suite names are confined to the same roots as the suite.
      Result<eval::JobStatus> job = jobs_->start(candidate, *suite_path, gates_path, options_.eval_roots);
      if (!job.is_ok()) return status_response(job.status());
      return json_response(http::status::accepted, job_json(*job));
    });
  }));
  router.add(http::verb::get, "/admin/evaluations", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    gate.answer_off_strand(ex, [this] {
      json data = json::array(), runs = json::array();
      for (const eval::JobStatus& j : jobs_->list()) data.push_back(job_json(j));
      Result<std::vector<EvaluationRecord>> stored = evaluations_->list(20);
      if (!stored.is_ok()) return status_response(stored.status());
      for (const EvaluationRecord& r : *stored) {
        runs.push_back({{"run", r.id}, {"verdict", r.verdict}, {"online", r.online_base}, {"candidate", r.candidate_base},
                        {"candidate_sha256", r.candidate_sha256}, {"finished_at", r.finished_at}});
      }
      return json_response(http::status::ok, {{"object", "list"}, {"data", data}, {"runs", runs}});
    });
  }));
  router.add_prefix(http::verb::get, "/admin/evaluations/", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    const std::string tail = tail_after(ex->request(), "/admin/evaluations/");
    char* end = nullptr;
    const long long id = std::strtoll(tail.c_str(), &end, 10);
    if (tail.empty() || *end != '\0' || id <= 0) {
      return ex->respond(bad_request("the evaluation id must be a positive integer").to_response());
    }
    gate.answer_off_strand(ex, [this, id] {
      Result<eval::JobStatus> job = jobs_->get(id);
      if (!job.is_ok()) return status_response(job.status());
      json out = job_json(*job);
      if (job->run_id > 0) {  // the verdict and its gates, from the stored run
        Result<EvaluationRecord> run = evaluations_->get(job->run_id);
        if (run.is_ok()) {
          const json report = json::parse(run->report, nullptr, /*allow_exceptions=*/false);
          if (!report.is_discarded()) out["gates"] = report.value("gates", json::array());
        }
      }
      return json_response(http::status::ok, out);
    });
  }));
}

}  // namespace loragate

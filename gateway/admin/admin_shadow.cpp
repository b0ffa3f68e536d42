// The shadow routes of AdminApi (admin_api.h), reached through
// /admin/bases/{name}/shadow: set and read the share of live requests copied
// to a base that does not serve. Answered off the strand: describe()
// computes percentiles over every scenario's histograms, and set() checks
// the scenarios named against the registry (one that does not exist there
// would match no request: a typo is refused, not silently shadowing nothing).
#include <set>

#include "gateway/admin/admin_api.h"
#include "gateway/admin/admin_request.h"
#include "registry/records.h"

namespace loragate {

void AdminApi::set_shadow(const std::shared_ptr<Exchange>& ex, const std::string& base, const AdminGate& gate) {
  nlohmann::json body;
  if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
  auto fraction = body.find("fraction");
  if (fraction == body.end() || !fraction->is_number()) {
    return ex->respond(bad_request("fraction must be a number in [0, 1]", "fraction").to_response());
  }
  std::set<std::string> scenarios;
  if (auto it = body.find("scenarios"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return ex->respond(bad_request("scenarios must be a list of names", "scenarios").to_response());
    for (const nlohmann::json& s : *it) {
      if (!s.is_string()) return ex->respond(bad_request("scenarios must be a list of names", "scenarios").to_response());
      if (Status valid = validate_name("scenario name", s.get<std::string>(), false); !valid.is_ok()) {
        return ex->respond(bad_request(valid.message(), "scenarios").to_response());
      }
      scenarios.insert(s.get<std::string>());
    }
  }
  gate.answer_off_strand(ex, [this, base, fraction = fraction->get<double>(),
                              scenarios = std::move(scenarios)]() mutable {
    if (!scenarios.empty()) {
      Result<std::vector<ScenarioRecord>> known = registry_->list_scenarios();
      if (!known.is_ok()) return status_response(known.status());
      std::set<std::string> names;
      for (const ScenarioRecord& r : *known) names.insert(r.name);
      for (const std::string& name : scenarios) {
        if (!names.count(name)) {
          return status_response(Status::not_found("scenario '" + name + "' does not exist on any base " +
                                                   "(PUT /admin/scenarios/" + name + " first)"));
        }
      }
    }
    Status s = shadow_->set(base, fraction, std::move(scenarios));
    if (!s.is_ok()) return status_response(s);
    Result<nlohmann::json> d = shadow_->describe(base);
    return json_response(http::status::ok, d.is_ok() ? *d : nlohmann::json::object());
  });
}

void AdminApi::describe_shadow(const std::shared_ptr<Exchange>& ex, const std::string& base, const AdminGate& gate) {
  gate.answer_off_strand(ex, [this, base] {
    Result<nlohmann::json> d = shadow_->describe(base);
    return d.is_ok() ? json_response(http::status::ok, *d) : status_response(d.status());
  });
}

}  // namespace loragate

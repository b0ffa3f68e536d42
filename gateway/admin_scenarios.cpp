// The scenario routes of AdminApi (admin_api.h): PUT/DELETE/GET /admin/scenarios.
#include "gateway/admin_api.h"
#include "gateway/admin_request.h"

namespace loragate {
namespace {

using nlohmann::json;

json scenario_json(const ScenarioRecord& r) {
  return {{"name", r.name}, {"base_model", r.base_model}, {"adapter", r.adapter},
          {"created_at", r.created_at}, {"updated_at", r.updated_at}};
}

}  // namespace

void AdminApi::install_scenarios(Router& router, const AdminGate& gate) {
  router.add_prefix(http::verb::put, "/admin/scenarios/", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    const std::string name = tail_after(ex->request(), "/admin/scenarios/");
    json body;
    std::string adapter;
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "adapter", &adapter)) return ex->respond(e->to_response());
    gate.answer_off_strand(ex, [this, name, adapter, base_name = named_base(ex->request(), body)] {
      Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
      if (!base.is_ok()) return status_response(base.status());
      Result<ScenarioRecord> r = registry_->set_scenario(name, (*base)->name(), adapter);
      routes_changed();
      if (!r.is_ok()) return status_response(r.status());
      return json_response(http::status::ok, scenario_json(*r));
    });
  }));
  router.add_prefix(http::verb::delete_, "/admin/scenarios/",
                    gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
                      gate.answer_off_strand(ex, [this, name = tail_after(ex->request(), "/admin/scenarios/"),
                                                  base_name = named_base(ex->request(), json::object())] {
                        Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
                        if (!base.is_ok()) return status_response(base.status());
                        Status s = registry_->remove_scenario(name, (*base)->name());
                        routes_changed();
                        if (!s.is_ok()) return status_response(s);
                        return json_response(http::status::ok, {{"name", name}, {"removed", true}});
                      });
                    }));
  router.add(http::verb::get, "/admin/scenarios", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    gate.answer_off_strand(ex, [this, base_name = named_base(ex->request(), json::object())] {
      Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
      if (!base.is_ok()) return status_response(base.status());
      Result<std::vector<ScenarioRecord>> records = registry_->list_scenarios((*base)->name());
      if (!records.is_ok()) return status_response(records.status());
      json data = json::array();
      for (const ScenarioRecord& r : *records) data.push_back(scenario_json(r));
      return json_response(http::status::ok, {{"object", "list"}, {"base", (*base)->name()}, {"data", data}});
    });
  }));
}

}  // namespace loragate

// The fleet routes of AdminApi (admin_api.h): GET /admin/fleet, and the
// promote of POST /admin/bases/{name}/promote when this server is a replica
// of a fleet (a rollout across every replica, fleet/fleet_rollout.h).
#include "gateway/admin/admin_api.h"
#include "gateway/admin/admin_request.h"

namespace loragate {
namespace {

using nlohmann::json;

json parsed_or_raw(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json(text) : j;
}

json rollout_json(const RolloutRecord& r) {
  return {{"id", r.id},
          {"kind", r.kind},
          {"from", r.from_base},
          {"to", r.to_base},
          {"coordinator", r.coordinator},
          {"state", r.state},
          {"started_at", r.started_at},
          {"updated_at", r.updated_at},
          {"steps", parsed_or_raw(r.steps)},
          {"error", r.error}};
}

}  // namespace

void AdminApi::install_fleet(Router& router, const AdminGate& gate) {
  router.add(http::verb::get, "/admin/fleet", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    if (fleet_ == nullptr) {
      return ex->respond(error_response(http::status::not_found,
                                        "this server is not a fleet replica (fleet.enabled, or a postgresql:// "
                                        "registry, makes it one)"));
    }
    gate.answer_off_strand(ex, [this] {
      Result<std::vector<ReplicaRecord>> replicas = registry_->list_replicas();
      if (!replicas.is_ok()) return status_response(replicas.status());
      Result<std::string> serving = fleet_->target_base();
      Result<std::vector<RolloutRecord>> rollouts = registry_->list_rollouts(5);
      if (!rollouts.is_ok()) return status_response(rollouts.status());
      const int64_t now = fleet_now_ms();
      json list = json::array();
      for (const ReplicaRecord& r : *replicas) {
        const bool lost = replica_lost(r, fleet_->options(), now);
        list.push_back({{"url", r.url},
                        {"serving", r.serving},
                        {"bases", parsed_or_raw(r.bases)},
                        {"adapters", parsed_or_raw(r.adapters)},
                        {"last_seen", static_cast<double>(r.last_seen) / 1000.0},
                        {"seconds_since_seen", static_cast<double>(now - r.last_seen) / 1000.0},
                        {"state", lost ? "lost" : "up"},
                        {"desired_base", r.desired_base},
                        {"started_at", r.started_at},
                        {"self", r.url == fleet_->options().url}});
      }
      json recent = json::array();
      for (const RolloutRecord& r : *rollouts) recent.push_back(rollout_json(r));
      return json_response(http::status::ok, {{"replicas", list},
                                              {"this_replica", fleet_->options().url},
                                              {"fleet_serving", serving.is_ok() ? *serving : ""},
                                              {"rollouts", recent}});
    });
  }));
}

void AdminApi::promote_across_fleet(const std::shared_ptr<Exchange>& ex, const std::string& name, bool force,
                                    const std::string& actor, const AdminGate& gate) {
  gate.answer_off_strand(ex, [this, name, force, actor] {
    Result<RolloutRecord> r = rollout_->promote(name, force, actor);
    routes_changed();
    if (!r.is_ok()) return status_response(r.status());
    return json_response(http::status::ok, {{"to", r->to_base},
                                            {"from", r->from_base},
                                            {"kind", r->kind},
                                            {"actor", actor},
                                            {"rollout", rollout_json(*r)}});
  });
}

}  // namespace loragate

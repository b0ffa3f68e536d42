// The base routes of AdminApi (admin_api.h): POST/GET/DELETE /admin/bases,
// promote and rollback; the shadow routes under /admin/bases/{name}/shadow
// are dispatched from here to admin_shadow.cpp.
#include <functional>
#include <string_view>

#include "common/path_roots.h"
#include "gateway/admin/admin_api.h"
#include "gateway/admin/admin_request.h"

namespace loragate {
namespace {

using nlohmann::json;

json base_json(const BaseStatus& b) {
  json j = {{"name", b.name},
            {"path", b.path},
            {"dtype", b.dtype},
            {"state", base_state_name(b.state)},
            {"sha256", b.sha256},
            {"system_fingerprint", b.fingerprint},
            {"weights_bytes", b.weights_bytes},
            {"kv_bytes", b.kv_bytes},
            {"adapter_bytes", b.adapter_bytes},
            {"adapters", b.adapters},
            {"requests_in_flight", b.in_flight}};
  if (!b.error.empty()) j["error"] = b.error;
  return j;
}

json swap_json(const SwapRecord& s) {
  return {{"id", s.id},     {"at", s.at},         {"actor", s.actor}, {"from", s.from_base},
          {"to", s.to_base}, {"kind", s.kind},     {"forced", s.forced}, {"note", s.note}};
}

// Whether promote (without force) would take a loaded base that does not
// serve, and each reason why not: the same checks promote makes.
void add_promotability(BaseSet& bases, const BaseStatus& b, json& j) {
  const bool promotable_state = b.state == BaseState::kCandidate || b.state == BaseState::kPrevious ||
                                b.state == BaseState::kDraining;
  if (!promotable_state) return;
  Result<std::vector<std::string>> blockers = bases.promotion_blockers(b.name);
  const std::vector<std::string> why =
      blockers.is_ok() ? *blockers : std::vector<std::string>{blockers.status().message()};
  j["promotable"] = why.empty();
  j["promotion_blocked_by"] = why;
  if (!bases.has_promote_check()) {
    j["promotion_note"] = "evaluation.require_pass_to_promote is off: promote asks for no evaluation";
  }
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Status AdminApi::add_base(const std::string& name, const std::string& path, WeightType dtype) {
  LG_ASSIGN_OR_RETURN(std::string real, resolve_inside_roots(path, options_.base_roots, "base model", "bases.roots"));
  Status added = bases_->add(BaseSpec{name, real, dtype});
  routes_changed();
  return added;
}

void AdminApi::install_bases(Router& router, const AdminGate& gate) {
  router.add(http::verb::post, "/admin/bases", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    json body;
    std::string name, path, dtype = "f32";
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "name", &name)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "path", &path)) return ex->respond(e->to_response());
    if (auto e = optional_string(body, "dtype", &dtype)) return ex->respond(e->to_response());
    Result<WeightType> parsed = parse_weight_type(dtype);
    if (!parsed.is_ok()) return ex->respond(bad_request(parsed.status().message(), "dtype").to_response());
    ex->record().base = name;
    gate.answer_off_strand(ex, [this, name, path, dtype = *parsed] {
      Status s = add_base(name, path, dtype);
      if (!s.is_ok()) return status_response(s);
      for (const BaseStatus& b : bases_->list()) {
        if (b.name == name) return json_response(http::status::accepted, base_json(b));
      }
      return json_response(http::status::accepted, {{"name", name}, {"state", "loading"}});
    });
  }));
  router.add(http::verb::get, "/admin/bases", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    gate.answer_off_strand(ex, [this] {
      json data = json::array();
      for (const BaseStatus& b : bases_->list()) {
        json j = base_json(b);
        add_promotability(*bases_, b, j);
        data.push_back(std::move(j));
      }
      json swaps = json::array();
      if (registry_ != nullptr) {
        Result<std::vector<SwapRecord>> recent = registry_->list_swaps(20);
        if (!recent.is_ok()) return status_response(recent.status());
        for (const SwapRecord& s : *recent) swaps.push_back(swap_json(s));
      }
      return json_response(http::status::ok, {{"object", "list"}, {"data", data}, {"swaps", swaps}});
    });
  }));
  router.add_prefix(http::verb::delete_, "/admin/bases/", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    gate.answer_off_strand(ex, [this, name = tail_after(ex->request(), "/admin/bases/")] {
      Status s = bases_->remove(name);
      routes_changed();
      if (!s.is_ok()) return status_response(s);
      return json_response(http::status::ok, {{"name", name}, {"removed", true}});
    });
  }));

  // Runs a promote or rollback off the strand and answers with its swap.
  auto run_swap = [this, gate](const std::shared_ptr<Exchange>& ex, std::function<Result<SwapRecord>()> swap_bases) {
    gate.answer_off_strand(ex, [this, swap_bases] {
      Result<SwapRecord> r = swap_bases();
      routes_changed();
      if (!r.is_ok()) return status_response(r.status());
      return json_response(http::status::ok, swap_json(*r));
    });
  };
  router.add(http::verb::post, "/admin/bases/rollback",
             gate.guard([this, run_swap](const std::shared_ptr<Exchange>& ex) {
               json body;
               if (auto e = parse_object(ex->request(), &body, /*empty_ok=*/true)) return ex->respond(e->to_response());
               run_swap(ex, [this, actor = actor_of(ex->request(), body)] { return bases_->rollback(actor); });
             }));
  router.add_prefix(http::verb::post, "/admin/bases/", gate.guard([this, run_swap, gate](const std::shared_ptr<Exchange>& ex) {
    std::string rest = tail_after(ex->request(), "/admin/bases/");
    constexpr std::string_view kShadow = "/shadow";
    if (shadow_ != nullptr && ends_with(rest, kShadow)) {
      return set_shadow(ex, rest.substr(0, rest.size() - kShadow.size()), gate);
    }
    constexpr std::string_view kPromote = "/promote";
    if (!ends_with(rest, kPromote)) {
      return ex->respond(error_response(http::status::not_found,
                                        "no route: use POST /admin/bases/{name}/promote or /admin/bases/rollback"));
    }
    const std::string name = rest.substr(0, rest.size() - kPromote.size());
    json body;
    if (auto e = parse_object(ex->request(), &body, /*empty_ok=*/true)) return ex->respond(e->to_response());
    bool force = false;
    if (auto it = body.find("force"); it != body.end() && !it->is_null()) {
      if (!it->is_boolean()) return ex->respond(bad_request("force must be a boolean", "force").to_response());
      force = it->get<bool>();
    }
    if (rollout_ != nullptr) return promote_across_fleet(ex, name, force, actor_of(ex->request(), body), gate);
    run_swap(ex, [this, name, force, actor = actor_of(ex->request(), body)] { return bases_->promote(name, force, actor); });
  }));
  router.add_prefix(http::verb::get, "/admin/bases/", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    std::string rest = tail_after(ex->request(), "/admin/bases/");
    constexpr std::string_view kShadow = "/shadow";
    if (shadow_ == nullptr || !ends_with(rest, kShadow)) {
      return ex->respond(error_response(http::status::not_found, "no route: use GET /admin/bases/{name}/shadow"));
    }
    describe_shadow(ex, rest.substr(0, rest.size() - kShadow.size()), gate);
  }));
}

}  // namespace loragate

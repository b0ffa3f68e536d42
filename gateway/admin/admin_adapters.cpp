// The adapter routes of AdminApi (admin_api.h): POST/DELETE/GET
// /admin/adapters and vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter.
#include <filesystem>
#include <map>

#include "adapters/lora_adapter.h"
#include "common/path_roots.h"
#include "gateway/admin/admin_api.h"
#include "gateway/admin/admin_request.h"

namespace loragate {
namespace {

using nlohmann::json;

json adapter_json(const AdapterRecord& r) {
  return {{"name", r.name},         {"base_model", r.base_model},       {"path", r.path},
          {"rank", r.rank},         {"alpha", r.alpha},                 {"target_modules", r.target_modules},
          {"sha256", r.sha256},     {"size_bytes", r.size_bytes},       {"state", adapter_state_name(r.state)},
          {"created_at", r.created_at}, {"updated_at", r.updated_at}};
}

}  // namespace

Result<AdapterRecord> AdminApi::register_adapter(const std::string& name, const std::string& path,
                                                 const std::string& base) {
  LG_RETURN_IF_ERROR(validate_name("adapter name", name, /*allow_slash=*/false));
  LG_RETURN_IF_ERROR(check_not_a_base_name(name));
  LG_RETURN_IF_ERROR(base_named(base).status());
  LG_ASSIGN_OR_RETURN(std::string real, resolve_inside_roots(path, options_.adapter_roots, "adapter", "adapters.roots"));
  return register_adapter_at(name, real, base);
}

Result<AdapterRecord> AdminApi::register_adapter_at(const std::string& name, const std::string& real,
                                                    const std::string& base) {
  LG_RETURN_IF_ERROR(validate_name("adapter name", name, /*allow_slash=*/false));
  LG_RETURN_IF_ERROR(check_not_a_base_name(name));
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> target, base_named(base));
  const std::string weights = real + "/adapter_model.safetensors";
  AdapterCatalog& cache = *target->adapters();
  // In the cache, not yet routable: requests reach it only once the routes
  // are reloaded below, after the load validated it and the registry has it.
  LG_RETURN_IF_ERROR(cache.add(name, real).with_context("base '" + target->name() + "'"));
  // Validate by loading, then record; on any failure the cache forgets the name.
  auto registered = [&]() -> Result<AdapterRecord> {
    LG_RETURN_IF_ERROR(cache.load_now(name));
    AdapterRecord record;
    for (const AdapterInfo& info : cache.list()) {
      if (info.name != name) continue;
      record.rank = info.rank;
      record.alpha = info.alpha;
      record.target_modules = info.target_modules;
      record.sha256 = info.sha256;  // of the bytes the validating load parsed; later loads must match
    }
    record.name = name;
    record.base_model = target->name();
    record.path = real;
    std::error_code ec;
    record.size_bytes = static_cast<int64_t>(std::filesystem::file_size(weights, ec));
    return registry_->add_adapter(record);
  }();
  if (!registered.is_ok()) (void)cache.remove(name);
  routes_changed();
  return registered;
}

Status AdminApi::unregister_adapter(const std::string& name, const std::string& base) {
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> target, base_named(base));
  Status removed = registry_->remove_adapter(name, target->name());
  if (removed.is_ok()) removed = target->adapters()->remove(name);
  routes_changed();
  return removed;
}

void AdminApi::install_adapters(Router& router, const AdminGate& gate) {
  // Reads the request on the strand; loading, hashing and registry writes run off it.
  auto add_adapter = [this, gate](const std::shared_ptr<Exchange>& ex, const char* name_key, const char* path_key) {
    json body;
    std::string name, path;
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, name_key, &name)) return ex->respond(e->to_response());
    if (auto e = string_field(body, path_key, &path)) return ex->respond(e->to_response());
    std::string base;  // read by named_base; checked here for its type
    if (auto e = optional_string(body, "base", &base)) return ex->respond(e->to_response());
    gate.off_strand(
        ex, [this, name, path, base = named_base(ex->request(), body)] { return register_adapter(name, path, base); },
        [ex](const Result<AdapterRecord>& r) {
          if (!r.is_ok()) return ex->respond(status_response(r.status()));
          ex->record().adapter = r->name;
          ex->record().base = r->base_model;
          ex->respond(json_response(http::status::created, adapter_json(*r)));
        });
  };
  auto remove_adapter = [this, gate](const std::shared_ptr<Exchange>& ex, const std::string& name,
                                     const std::string& base) {
    gate.answer_off_strand(ex, [this, name, base] {
      Status s = unregister_adapter(name, base);
      if (!s.is_ok()) return status_response(s);
      return json_response(http::status::ok, {{"name", name}, {"removed", true}});
    });
  };

  router.add(http::verb::post, "/admin/adapters",
             gate.guard([add_adapter](const std::shared_ptr<Exchange>& ex) { add_adapter(ex, "name", "path"); }));
  router.add_prefix(http::verb::delete_, "/admin/adapters/",
                    gate.guard([remove_adapter](const std::shared_ptr<Exchange>& ex) {
                      remove_adapter(ex, tail_after(ex->request(), "/admin/adapters/"),
                                     named_base(ex->request(), json::object()));
                    }));
  router.add(http::verb::get, "/admin/adapters", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    gate.answer_off_strand(ex, [this, base_name = named_base(ex->request(), json::object())] {
      Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
      if (!base.is_ok()) return status_response(base.status());
      Result<std::vector<AdapterRecord>> records = registry_->list_adapters((*base)->name());
      if (!records.is_ok()) return status_response(records.status());
      std::map<std::string, AdapterInfo> live;
      for (AdapterInfo& info : (*base)->adapters()->list()) live[info.name] = std::move(info);
      json data = json::array();
      for (const AdapterRecord& r : *records) {
        json j = adapter_json(r);
        auto it = live.find(r.name);
        j["cache_tier"] = it == live.end() ? "none" : adapter_tier_name(it->second.tier);
        if (it != live.end() && !it->second.error.empty()) j["load_error"] = it->second.error;
        j["requests"] = metrics_ != nullptr ? metrics_->requests_for(r.base_model, r.name) : 0;
        data.push_back(std::move(j));
      }
      return json_response(http::status::ok, {{"object", "list"}, {"base", (*base)->name()}, {"data", data}});
    });
  }));

  // vLLM's runtime LoRA routes, behind the same token, on the serving base.
  router.add(http::verb::post, "/v1/load_lora_adapter", gate.guard([add_adapter](const std::shared_ptr<Exchange>& ex) {
    add_adapter(ex, "lora_name", "lora_path");
  }));
  router.add(http::verb::post, "/v1/unload_lora_adapter",
             gate.guard([remove_adapter](const std::shared_ptr<Exchange>& ex) {
               json body;
               std::string name;
               if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
               if (auto e = string_field(body, "lora_name", &name)) return ex->respond(e->to_response());
               remove_adapter(ex, name, named_base(ex->request(), body));
             }));
}

}  // namespace loragate

#include "gateway/admin_api.h"

#include <filesystem>
#include <map>
#include <optional>

#include "adapters/lora_adapter.h"
#include "gateway/openai_errors.h"
#include "registry/sha256.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

// Compares without an early exit, so timing does not reveal the common prefix.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

// Parses a JSON object body, or says what is wrong with it.
std::optional<ApiError> parse_object(const HttpRequest& request, nlohmann::json* out) {
  *out = nlohmann::json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return bad_request("the body is not valid JSON");
  if (!out->is_object()) return bad_request("the body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> string_field(const nlohmann::json& body, const char* key, std::string* out) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string() || it->get<std::string>().empty()) {
    return bad_request(std::string(key) + " must be a non-empty string", key);
  }
  *out = it->get<std::string>();
  return std::nullopt;
}

HttpResponse status_response(const Status& s) {
  http::status code = http_status_for(s);
  // Refusals that name a conflicting registration (a scenario using the adapter).
  if (s.code() == StatusCode::kInvalidArgument && s.message().find("scenario") != std::string::npos &&
      s.message().find("uses") != std::string::npos) {
    code = http::status::conflict;
  }
  return error_response(code, s.message());
}

nlohmann::json adapter_json(const AdapterRecord& r) {
  return {{"name", r.name},         {"base_model", r.base_model},       {"path", r.path},
          {"rank", r.rank},         {"alpha", r.alpha},                 {"target_modules", r.target_modules},
          {"sha256", r.sha256},     {"size_bytes", r.size_bytes},       {"state", adapter_state_name(r.state)},
          {"created_at", r.created_at}, {"updated_at", r.updated_at}};
}

nlohmann::json scenario_json(const ScenarioRecord& r) {
  return {{"name", r.name}, {"base_model", r.base_model}, {"adapter", r.adapter},
          {"created_at", r.created_at}, {"updated_at", r.updated_at}};
}

// The last path segment after `prefix` ("/admin/adapters/x" -> "x").
std::string tail_after(const HttpRequest& request, std::string_view prefix) {
  return std::string(Router::path_of(request.target()).substr(prefix.size()));
}

}  // namespace

AdminApi::AdminApi(AdminOptions options, Registry* registry, AdapterCache* cache, const Metrics* metrics)
    : options_(std::move(options)), registry_(registry), cache_(cache), metrics_(metrics) {}

std::optional<HttpResponse> AdminApi::check_auth(const HttpRequest& request) const {
  if (options_.token.empty()) {
    return error_response(http::status::forbidden, "admin routes are disabled: no admin token is configured");
  }
  const auto it = request.find(http::field::authorization);
  constexpr std::string_view kBearer = "Bearer ";
  if (it == request.end() || it->value().substr(0, kBearer.size()) != kBearer) {
    return error_response(http::status::unauthorized, "admin routes need Authorization: Bearer <token>");
  }
  if (!constant_time_equal(it->value().substr(kBearer.size()), options_.token)) {
    return error_response(http::status::unauthorized, "the admin token is wrong");
  }
  return std::nullopt;
}

Result<std::string> AdminApi::resolve_inside_roots(const std::string& path) const {
  if (options_.adapter_roots.empty()) {
    return Status::invalid_argument("no adapter roots are configured (adapters.roots): registration is disabled");
  }
  // The real path (every "..", "." and symlink resolved) must lie inside a real root.
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  if (ec) return Status::not_found("adapter path '" + path + "': " + ec.message());
  for (const std::string& root : options_.adapter_roots) {
    const fs::path real_root = fs::canonical(root, ec);
    if (ec) continue;
    const std::string r = real_root.string(), p = real.string();
    if (p == r || (p.size() > r.size() && p.compare(0, r.size(), r) == 0 && p[r.size()] == '/')) return p;
  }
  return Status::invalid_argument("adapter path '" + path + "' resolves to '" + real.string() +
                                  "', outside every configured adapter root");
}

Result<AdapterRecord> AdminApi::register_adapter(const std::string& name, const std::string& path) {
  LG_RETURN_IF_ERROR(validate_name("adapter name", name, /*allow_slash=*/false));
  LG_ASSIGN_OR_RETURN(std::string real, resolve_inside_roots(path));
  const std::string weights = real + "/adapter_model.safetensors";
  LG_RETURN_IF_ERROR(cache_->add(name, real));
  // Validate by loading, then record; on any failure the cache forgets the name.
  auto registered = [&]() -> Result<AdapterRecord> {
    LG_RETURN_IF_ERROR(cache_->load_now(name));
    AdapterRecord record;
    for (const AdapterInfo& info : cache_->list()) {
      if (info.name != name) continue;
      record.rank = info.rank;
      record.alpha = info.alpha;
      record.target_modules = info.target_modules;
    }
    record.name = name;
    record.base_model = options_.base_model;
    record.path = real;
    LG_ASSIGN_OR_RETURN(record.sha256, sha256_file(weights));
    std::error_code ec;
    record.size_bytes = static_cast<int64_t>(fs::file_size(weights, ec));
    return registry_->add_adapter(record);
  }();
  if (!registered.is_ok()) (void)cache_->remove(name);
  return registered;
}

Status AdminApi::unregister_adapter(const std::string& name) {
  LG_RETURN_IF_ERROR(registry_->remove_adapter(name));
  return cache_->remove(name);
}

void AdminApi::install(Router& router) {
  // Every admin handler checks the token first.
  auto guarded = [this](auto handler) {
    return [this, handler](const std::shared_ptr<Exchange>& ex) {
      if (auto denied = check_auth(ex->request())) return ex->respond(std::move(*denied));
      handler(ex);
    };
  };
  auto add_adapter = [this](const std::shared_ptr<Exchange>& ex, const char* name_key, const char* path_key) {
    nlohmann::json body;
    std::string name, path;
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, name_key, &name)) return ex->respond(e->to_response());
    if (auto e = string_field(body, path_key, &path)) return ex->respond(e->to_response());
    Result<AdapterRecord> r = register_adapter(name, path);
    if (!r.is_ok()) return ex->respond(status_response(r.status()));
    ex->record().adapter = name;
    ex->respond(json_response(http::status::created, adapter_json(*r)));
  };
  auto remove_adapter = [this](const std::shared_ptr<Exchange>& ex, const std::string& name) {
    Status s = unregister_adapter(name);
    if (!s.is_ok()) return ex->respond(status_response(s));
    ex->respond(json_response(http::status::ok, {{"name", name}, {"removed", true}}));
  };

  router.add(http::verb::post, "/admin/adapters", guarded([add_adapter](const std::shared_ptr<Exchange>& ex) {
    add_adapter(ex, "name", "path");
  }));
  router.add_prefix(http::verb::delete_, "/admin/adapters/",
                    guarded([remove_adapter](const std::shared_ptr<Exchange>& ex) {
                      remove_adapter(ex, tail_after(ex->request(), "/admin/adapters/"));
                    }));
  router.add(http::verb::get, "/admin/adapters", guarded([this](const std::shared_ptr<Exchange>& ex) {
    Result<std::vector<AdapterRecord>> records = registry_->list_adapters(options_.base_model);
    if (!records.is_ok()) return ex->respond(status_response(records.status()));
    std::map<std::string, AdapterInfo> live;
    for (AdapterInfo& info : cache_->list()) live[info.name] = std::move(info);
    nlohmann::json data = nlohmann::json::array();
    for (const AdapterRecord& r : *records) {
      nlohmann::json j = adapter_json(r);
      auto it = live.find(r.name);
      j["cache_tier"] = it == live.end() ? "none" : adapter_tier_name(it->second.tier);
      if (it != live.end() && !it->second.error.empty()) j["load_error"] = it->second.error;
      j["requests"] = metrics_ != nullptr ? metrics_->requests_for(r.name) : 0;
      data.push_back(std::move(j));
    }
    ex->respond(json_response(http::status::ok, {{"object", "list"}, {"data", data}}));
  }));

  router.add_prefix(http::verb::put, "/admin/scenarios/", guarded([this](const std::shared_ptr<Exchange>& ex) {
    const std::string name = tail_after(ex->request(), "/admin/scenarios/");
    nlohmann::json body;
    std::string adapter;
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "adapter", &adapter)) return ex->respond(e->to_response());
    Result<ScenarioRecord> r = registry_->set_scenario(name, options_.base_model, adapter);
    if (!r.is_ok()) return ex->respond(status_response(r.status()));
    ex->respond(json_response(http::status::ok, scenario_json(*r)));
  }));
  router.add_prefix(http::verb::delete_, "/admin/scenarios/", guarded([this](const std::shared_ptr<Exchange>& ex) {
    const std::string name = tail_after(ex->request(), "/admin/scenarios/");
    Status s = registry_->remove_scenario(name, options_.base_model);
    if (!s.is_ok()) return ex->respond(status_response(s));
    ex->respond(json_response(http::status::ok, {{"name", name}, {"removed", true}}));
  }));
  router.add(http::verb::get, "/admin/scenarios", guarded([this](const std::shared_ptr<Exchange>& ex) {
    Result<std::vector<ScenarioRecord>> records = registry_->list_scenarios(options_.base_model);
    if (!records.is_ok()) return ex->respond(status_response(records.status()));
    nlohmann::json data = nlohmann::json::array();
    for (const ScenarioRecord& r : *records) data.push_back(scenario_json(r));
    ex->respond(json_response(http::status::ok, {{"object", "list"}, {"data", data}}));
  }));

  // vLLM's runtime LoRA routes, behind the same token.
  router.add(http::verb::post, "/v1/load_lora_adapter", guarded([add_adapter](const std::shared_ptr<Exchange>& ex) {
    add_adapter(ex, "lora_name", "lora_path");
  }));
  router.add(http::verb::post, "/v1/unload_lora_adapter",
             guarded([remove_adapter](const std::shared_ptr<Exchange>& ex) {
               nlohmann::json body;
               std::string name;
               if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
               if (auto e = string_field(body, "lora_name", &name)) return ex->respond(e->to_response());
               remove_adapter(ex, name);
             }));
}

}  // namespace loragate

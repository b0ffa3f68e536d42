#include "gateway/admin_api.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "adapters/lora_adapter.h"
#include "common/path_roots.h"
#include "gateway/admin_auth.h"
#include "gateway/openai_errors.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Parses a JSON object body (an empty body reads as {}), or says what is wrong with it.
std::optional<ApiError> parse_object(const HttpRequest& request, json* out, bool empty_ok = false) {
  if (empty_ok && request.body().empty()) {
    *out = json::object();
    return std::nullopt;
  }
  *out = json::parse(request.body(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return bad_request("the body is not valid JSON");
  if (!out->is_object()) return bad_request("the body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> string_field(const json& body, const char* key, std::string* out) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string() || it->get<std::string>().empty()) {
    return bad_request(std::string(key) + " must be a non-empty string", key);
  }
  *out = it->get<std::string>();
  return std::nullopt;
}

// An optional string field: absent or null leaves *out alone.
std::optional<ApiError> optional_string(const json& body, const char* key, std::string* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return bad_request(std::string(key) + " must be a string", key);
  *out = it->get<std::string>();
  return std::nullopt;
}

HttpResponse status_response(const Status& s) { return error_response(http_status_for(s), s.message()); }

json adapter_json(const AdapterRecord& r) {
  return {{"name", r.name},         {"base_model", r.base_model},       {"path", r.path},
          {"rank", r.rank},         {"alpha", r.alpha},                 {"target_modules", r.target_modules},
          {"sha256", r.sha256},     {"size_bytes", r.size_bytes},       {"state", adapter_state_name(r.state)},
          {"created_at", r.created_at}, {"updated_at", r.updated_at}};
}

json scenario_json(const ScenarioRecord& r) {
  return {{"name", r.name}, {"base_model", r.base_model}, {"adapter", r.adapter},
          {"created_at", r.created_at}, {"updated_at", r.updated_at}};
}

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

json job_json(const eval::JobStatus& j) {
  json out = {{"id", j.id},       {"candidate", j.candidate}, {"online", j.online}, {"state", j.state},
              {"done", j.done},   {"total", j.total}};
  if (!j.verdict.empty()) out["verdict"] = j.verdict;
  if (j.run_id > 0) out["run"] = j.run_id;
  if (!j.error.empty()) out["error"] = j.error;
  return out;
}

json swap_json(const SwapRecord& s) {
  return {{"id", s.id},     {"at", s.at},         {"actor", s.actor}, {"from", s.from_base},
          {"to", s.to_base}, {"kind", s.kind},     {"forced", s.forced}, {"note", s.note}};
}

// "%41" -> "A"; a '%' not followed by two hex digits stays as it is.
std::string percent_decoded(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() && std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(raw.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += raw[i];
    }
  }
  return out;
}

// The path after `prefix`, percent-decoded ("/admin/adapters/a%2Db" -> "a-b"), as the CLI encodes it.
std::string tail_after(const HttpRequest& request, std::string_view prefix) {
  return percent_decoded(Router::path_of(request.target()).substr(prefix.size()));
}

// The value of `key` in the query string, percent-decoded; "" when absent.
std::string query_param(const HttpRequest& request, std::string_view key) {
  const std::string_view target = request.target();
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return "";
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != key) continue;
    std::string value(pair.substr(eq + 1));
    std::replace(value.begin(), value.end(), '+', ' ');
    return percent_decoded(value);
  }
  return "";
}

// The base an admin call names: the body's `base`, else ?base=, else the X-Base header ("" = serving).
std::string named_base(const HttpRequest& request, const json& body) {
  if (auto it = body.find("base"); it != body.end() && it->is_string()) return it->get<std::string>();
  std::string q = query_param(request, "base");
  if (!q.empty()) return q;
  auto header = request.find("X-Base");
  return header == request.end() ? "" : std::string(header->value());
}

// Who asked: the body's `by`, else the X-Actor header, else "admin".
std::string actor_of(const HttpRequest& request, const json& body) {
  if (auto it = body.find("by"); it != body.end() && it->is_string() && !it->get<std::string>().empty()) {
    return it->get<std::string>().substr(0, 256);
  }
  auto header = request.find("X-Actor");
  if (header != request.end() && !header->value().empty()) return std::string(header->value().substr(0, 256));
  return "admin";
}

}  // namespace

AdminApi::AdminApi(AdminOptions options, Registry* registry, BaseSet* bases, const Metrics* metrics,
                   eval::EvaluationJobs* jobs, EvaluationStore* evaluations)
    : options_(std::move(options)),
      registry_(registry),
      bases_(bases),
      metrics_(metrics),
      jobs_(jobs),
      evaluations_(evaluations) {}

Result<std::shared_ptr<ServingBase>> AdminApi::base_named(const std::string& name) const {
  if (!name.empty()) return bases_->find(name);
  std::shared_ptr<ServingBase> serving = bases_->serving();
  if (serving == nullptr) return Status::failed_precondition("no base model is serving yet");
  return serving;
}

Result<AdapterRecord> AdminApi::register_adapter(const std::string& name, const std::string& path,
                                                 const std::string& base) {
  LG_RETURN_IF_ERROR(validate_name("adapter name", name, /*allow_slash=*/false));
  LG_RETURN_IF_ERROR(check_not_a_base_name(name));
  LG_ASSIGN_OR_RETURN(std::shared_ptr<ServingBase> target, base_named(base));
  LG_ASSIGN_OR_RETURN(std::string real, resolve_inside_roots(path, options_.adapter_roots, "adapter", "adapters.roots"));
  const std::string weights = real + "/adapter_model.safetensors";
  AdapterCache& cache = *target->adapters();
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
    record.size_bytes = static_cast<int64_t>(fs::file_size(weights, ec));
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

Status AdminApi::add_base(const std::string& name, const std::string& path, WeightType dtype) {
  LG_ASSIGN_OR_RETURN(std::string real, resolve_inside_roots(path, options_.base_roots, "base model", "bases.roots"));
  Status added = bases_->add(BaseSpec{name, real, dtype});
  routes_changed();
  return added;
}

Status AdminApi::check_not_a_base_name(const std::string& name) const {
  bool taken = name == options_.served_name;
  for (const BaseStatus& b : bases_->list()) taken = taken || b.name == name;
  if (!taken) return Status::ok();
  return Status::already_exists("adapter name '" + name +
                                "' is the name of a base model: requests naming it reach the base; choose another name");
}

// After every write, whatever its outcome: the routes in memory follow the registry.
void AdminApi::routes_changed() {
  if (routes_ == nullptr) return;
  if (Status s = routes_->reload(); !s.is_ok()) {
    std::cerr << "loragate: routes not reloaded after an admin write (the previous ones still apply): "
              << s.to_string() << "\n";
  }
}

void AdminApi::answer_off_strand(const std::shared_ptr<Exchange>& ex, std::function<HttpResponse()> work) {
  run_off_strand(*blocking_, ex, std::move(work), [ex](HttpResponse response) { ex->respond(std::move(response)); });
}

void AdminApi::install(Router& router, BlockingWork& blocking) {
  blocking_ = &blocking;
  // Every admin handler checks the token first.
  auto guarded = [this](auto handler) {
    return [this, handler](const std::shared_ptr<Exchange>& ex) {
      if (auto denied = check_admin_token(ex->request(), options_.token)) return ex->respond(denied->to_response());
      handler(ex);
    };
  };
  // Reads the request on the strand; loading, hashing and registry writes run off it.
  auto add_adapter = [this](const std::shared_ptr<Exchange>& ex, const char* name_key, const char* path_key) {
    json body;
    std::string name, path;
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, name_key, &name)) return ex->respond(e->to_response());
    if (auto e = string_field(body, path_key, &path)) return ex->respond(e->to_response());
    std::string base;  // read by named_base; checked here for its type
    if (auto e = optional_string(body, "base", &base)) return ex->respond(e->to_response());
    run_off_strand(
        *blocking_, ex,
        [this, name, path, base = named_base(ex->request(), body)] { return register_adapter(name, path, base); },
        [ex](const Result<AdapterRecord>& r) {
          if (!r.is_ok()) return ex->respond(status_response(r.status()));
          ex->record().adapter = r->name;
          ex->record().base = r->base_model;
          ex->respond(json_response(http::status::created, adapter_json(*r)));
        });
  };
  auto remove_adapter = [this](const std::shared_ptr<Exchange>& ex, const std::string& name, const std::string& base) {
    answer_off_strand(ex, [this, name, base] {
      Status s = unregister_adapter(name, base);
      if (!s.is_ok()) return status_response(s);
      return json_response(http::status::ok, {{"name", name}, {"removed", true}});
    });
  };

  // --- adapters ---
  router.add(http::verb::post, "/admin/adapters", guarded([add_adapter](const std::shared_ptr<Exchange>& ex) {
    add_adapter(ex, "name", "path");
  }));
  router.add_prefix(http::verb::delete_, "/admin/adapters/",
                    guarded([remove_adapter](const std::shared_ptr<Exchange>& ex) {
                      remove_adapter(ex, tail_after(ex->request(), "/admin/adapters/"),
                                     named_base(ex->request(), json::object()));
                    }));
  router.add(http::verb::get, "/admin/adapters", guarded([this](const std::shared_ptr<Exchange>& ex) {
    answer_off_strand(ex, [this, base_name = named_base(ex->request(), json::object())] {
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

  // --- scenarios ---
  router.add_prefix(http::verb::put, "/admin/scenarios/", guarded([this](const std::shared_ptr<Exchange>& ex) {
    const std::string name = tail_after(ex->request(), "/admin/scenarios/");
    json body;
    std::string adapter;
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "adapter", &adapter)) return ex->respond(e->to_response());
    answer_off_strand(ex, [this, name, adapter, base_name = named_base(ex->request(), body)] {
      Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
      if (!base.is_ok()) return status_response(base.status());
      Result<ScenarioRecord> r = registry_->set_scenario(name, (*base)->name(), adapter);
      routes_changed();
      if (!r.is_ok()) return status_response(r.status());
      return json_response(http::status::ok, scenario_json(*r));
    });
  }));
  router.add_prefix(http::verb::delete_, "/admin/scenarios/", guarded([this](const std::shared_ptr<Exchange>& ex) {
    answer_off_strand(ex, [this, name = tail_after(ex->request(), "/admin/scenarios/"),
                           base_name = named_base(ex->request(), json::object())] {
      Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
      if (!base.is_ok()) return status_response(base.status());
      Status s = registry_->remove_scenario(name, (*base)->name());
      routes_changed();
      if (!s.is_ok()) return status_response(s);
      return json_response(http::status::ok, {{"name", name}, {"removed", true}});
    });
  }));
  router.add(http::verb::get, "/admin/scenarios", guarded([this](const std::shared_ptr<Exchange>& ex) {
    answer_off_strand(ex, [this, base_name = named_base(ex->request(), json::object())] {
      Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
      if (!base.is_ok()) return status_response(base.status());
      Result<std::vector<ScenarioRecord>> records = registry_->list_scenarios((*base)->name());
      if (!records.is_ok()) return status_response(records.status());
      json data = json::array();
      for (const ScenarioRecord& r : *records) data.push_back(scenario_json(r));
      return json_response(http::status::ok, {{"object", "list"}, {"base", (*base)->name()}, {"data", data}});
    });
  }));

  // --- bases ---
  router.add(http::verb::post, "/admin/bases", guarded([this](const std::shared_ptr<Exchange>& ex) {
    json body;
    std::string name, path, dtype = "f32";
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "name", &name)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "path", &path)) return ex->respond(e->to_response());
    if (auto e = optional_string(body, "dtype", &dtype)) return ex->respond(e->to_response());
    Result<WeightType> parsed = parse_weight_type(dtype);
    if (!parsed.is_ok()) return ex->respond(bad_request(parsed.status().message(), "dtype").to_response());
    ex->record().base = name;
    answer_off_strand(ex, [this, name, path, dtype = *parsed] {
      Status s = add_base(name, path, dtype);
      if (!s.is_ok()) return status_response(s);
      for (const BaseStatus& b : bases_->list()) {
        if (b.name == name) return json_response(http::status::accepted, base_json(b));
      }
      return json_response(http::status::accepted, {{"name", name}, {"state", "loading"}});
    });
  }));
  router.add(http::verb::get, "/admin/bases", guarded([this](const std::shared_ptr<Exchange>& ex) {
    answer_off_strand(ex, [this] {
      json data = json::array();
      for (const BaseStatus& b : bases_->list()) data.push_back(base_json(b));
      json swaps = json::array();
      if (registry_ != nullptr) {
        Result<std::vector<SwapRecord>> recent = registry_->list_swaps(20);
        if (!recent.is_ok()) return status_response(recent.status());
        for (const SwapRecord& s : *recent) swaps.push_back(swap_json(s));
      }
      return json_response(http::status::ok, {{"object", "list"}, {"data", data}, {"swaps", swaps}});
    });
  }));
  router.add_prefix(http::verb::delete_, "/admin/bases/", guarded([this](const std::shared_ptr<Exchange>& ex) {
    answer_off_strand(ex, [this, name = tail_after(ex->request(), "/admin/bases/")] {
      Status s = bases_->remove(name);
      routes_changed();
      if (!s.is_ok()) return status_response(s);
      return json_response(http::status::ok, {{"name", name}, {"removed", true}});
    });
  }));
  // Runs a promote or rollback off the strand and answers with its swap.
  auto run_swap = [this](const std::shared_ptr<Exchange>& ex, std::function<Result<SwapRecord>()> swap_bases) {
    answer_off_strand(ex, [this, swap_bases] {
      Result<SwapRecord> r = swap_bases();
      routes_changed();
      if (!r.is_ok()) return status_response(r.status());
      return json_response(http::status::ok, swap_json(*r));
    });
  };
  router.add(http::verb::post, "/admin/bases/rollback", guarded([this, run_swap](const std::shared_ptr<Exchange>& ex) {
    json body;
    if (auto e = parse_object(ex->request(), &body, /*empty_ok=*/true)) return ex->respond(e->to_response());
    run_swap(ex, [this, actor = actor_of(ex->request(), body)] { return bases_->rollback(actor); });
  }));
  router.add_prefix(http::verb::post, "/admin/bases/", guarded([this, run_swap](const std::shared_ptr<Exchange>& ex) {
    std::string rest = tail_after(ex->request(), "/admin/bases/");
    constexpr std::string_view kShadow = "/shadow";
    if (shadow_ != nullptr && rest.size() > kShadow.size() &&
        rest.compare(rest.size() - kShadow.size(), kShadow.size(), kShadow) == 0) {
      return set_shadow(ex, rest.substr(0, rest.size() - kShadow.size()));
    }
    constexpr std::string_view kPromote = "/promote";
    if (rest.size() <= kPromote.size() || rest.compare(rest.size() - kPromote.size(), kPromote.size(), kPromote) != 0) {
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
    run_swap(ex, [this, name, force, actor = actor_of(ex->request(), body)] { return bases_->promote(name, force, actor); });
  }));

  router.add_prefix(http::verb::get, "/admin/bases/", guarded([this](const std::shared_ptr<Exchange>& ex) {
    std::string rest = tail_after(ex->request(), "/admin/bases/");
    constexpr std::string_view kShadow = "/shadow";
    if (shadow_ == nullptr || rest.size() <= kShadow.size() ||
        rest.compare(rest.size() - kShadow.size(), kShadow.size(), kShadow) != 0) {
      return ex->respond(error_response(http::status::not_found, "no route: use GET /admin/bases/{name}/shadow"));
    }
    Result<json> d = shadow_->describe(rest.substr(0, rest.size() - kShadow.size()));
    if (!d.is_ok()) return ex->respond(status_response(d.status()));
    ex->respond(json_response(http::status::ok, *d));
  }));

  // --- evaluations ---
  if (jobs_ != nullptr && evaluations_ != nullptr) install_evaluations(router, guarded);

  // vLLM's runtime LoRA routes, behind the same token, on the serving base.
  router.add(http::verb::post, "/v1/load_lora_adapter", guarded([add_adapter](const std::shared_ptr<Exchange>& ex) {
    add_adapter(ex, "lora_name", "lora_path");
  }));
  router.add(http::verb::post, "/v1/unload_lora_adapter",
             guarded([remove_adapter](const std::shared_ptr<Exchange>& ex) {
               json body;
               std::string name;
               if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
               if (auto e = string_field(body, "lora_name", &name)) return ex->respond(e->to_response());
               remove_adapter(ex, name, named_base(ex->request(), body));
             }));
}

void AdminApi::set_shadow(const std::shared_ptr<Exchange>& ex, const std::string& base) {
  json body;
  if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
  auto fraction = body.find("fraction");
  if (fraction == body.end() || !fraction->is_number()) {
    return ex->respond(bad_request("fraction must be a number in [0, 1]", "fraction").to_response());
  }
  std::set<std::string> scenarios;
  if (auto it = body.find("scenarios"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return ex->respond(bad_request("scenarios must be a list of names", "scenarios").to_response());
    for (const json& s : *it) {
      if (!s.is_string()) return ex->respond(bad_request("scenarios must be a list of names", "scenarios").to_response());
      scenarios.insert(s.get<std::string>());
    }
  }
  Status s = shadow_->set(base, fraction->get<double>(), std::move(scenarios));
  if (!s.is_ok()) return ex->respond(status_response(s));
  Result<json> d = shadow_->describe(base);
  ex->respond(json_response(http::status::ok, d.is_ok() ? *d : json::object()));
}

template <typename Guard>
void AdminApi::install_evaluations(Router& router, Guard guarded) {
  router.add(http::verb::post, "/admin/evaluations", guarded([this](const std::shared_ptr<Exchange>& ex) {
    json body;
    std::string candidate, suite, gates;
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "candidate", &candidate)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "suite", &suite)) return ex->respond(e->to_response());
    if (auto e = optional_string(body, "gates", &gates)) return ex->respond(e->to_response());
    answer_off_strand(ex, [this, candidate, suite, gates] {
      Result<std::string> suite_path = resolve_inside_roots(suite, options_.eval_roots, "suite", "evaluation.roots");
      if (!suite_path.is_ok()) return status_response(suite_path.status());
      std::string gates_path;
      if (!gates.empty()) {
        Result<std::string> g = resolve_inside_roots(gates, options_.eval_roots, "gates", "evaluation.roots");
        if (!g.is_ok()) return status_response(g.status());
        gates_path = *g;
      }
      Result<eval::JobStatus> job = jobs_->start(candidate, *suite_path, gates_path);
      if (!job.is_ok()) return status_response(job.status());
      return json_response(http::status::accepted, job_json(*job));
    });
  }));
  router.add(http::verb::get, "/admin/evaluations", guarded([this](const std::shared_ptr<Exchange>& ex) {
    answer_off_strand(ex, [this] {
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
  router.add_prefix(http::verb::get, "/admin/evaluations/", guarded([this](const std::shared_ptr<Exchange>& ex) {
    const std::string tail = tail_after(ex->request(), "/admin/evaluations/");
    char* end = nullptr;
    const long long id = std::strtoll(tail.c_str(), &end, 10);
    if (tail.empty() || *end != '\0' || id <= 0) {
      return ex->respond(bad_request("the evaluation id must be a positive integer").to_response());
    }
    answer_off_strand(ex, [this, id] {
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

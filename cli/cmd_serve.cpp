// `loragate serve`: the gateway. Opens the SQLite registry, loads the base
// that serves (the registry's serving base after a promotion, else the
// configured model, or the synthesised demo), reloads the candidate and
// previous bases the registry records in the background, restores adapters
// and scenarios, applies the config's preloads and scenarios, and serves the
// OpenAI, admin and metrics routes (upgrades included) until SIGINT/SIGTERM,
// then drains and exits 0. With a shared (PostgreSQL) registry it is a fleet
// replica: it heartbeats, converges on the registry and rolls promotes
// across the fleet (fleet/).
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "bases/base_set.h"
#include "cli/commands.h"
#include "cli/demo.h"
#include "cli/history_db.h"
#include "cli/serve_config.h"
#include "common/weight_type.h"
#include "engine/quantized_file.h"
#include "fleet/fleet_member.h"
#include "fleet/fleet_rollout.h"
#include "gateway/admin/admin_api.h"
#include "gateway/gateway.h"
#include "gateway/metrics/metrics.h"
#include "gateway/metrics/metrics_route.h"
#include "gateway/registry_resolver.h"
#include "registry/registry.h"
#include "registry/upgrade_store.h"
#include "upgrade/evaluation_jobs.h"
#include "upgrade/promotion_check.h"
#include "upgrade/upgrade_job.h"

namespace loragate::cli {
namespace {

struct ServeFlags {
  std::string config;
  std::string host, model, served_name, admin_token, registry, replica_url;
  std::vector<std::string> adapter_roots, base_roots, eval_roots, training_roots;
  int port = -1;
  std::string dtype;  // --dtype: overrides model.dtype
  bool prefix_caching = false, no_prefix_caching = false;  // override engine.prefix_caching (one at most)
};

Result<std::unique_ptr<Registry>> open_registry(const ServeConfig& c) {
  make_parent_folder(c.registry_path);
  return Registry::open(c.registry_path);
}

// What serves at start: the configured model, unless the registry knows it
// already and says another base serves (it was promoted before a restart).
Result<BaseSpec> initial_base(const ServeConfig& c, Registry& registry) {
  BaseSpec configured{c.served_model_name, c.model_path, c.engine.weight_dtype};
  LG_ASSIGN_OR_RETURN(std::vector<BaseModelRecord> bases, registry.list_base_models());
  bool known = false;
  const BaseModelRecord* serving = nullptr;
  for (const BaseModelRecord& b : bases) {
    if (b.name == configured.name) known = true;
    if (b.state == BaseModelState::kServing) serving = &b;
  }
  if (!known || serving == nullptr || serving->name == configured.name) return configured;
  LG_ASSIGN_OR_RETURN(WeightType dtype, parse_weight_type(serving->dtype));
  std::cerr << "loragate: base '" << serving->name << "' (" << serving->path << ") was promoted before this restart"
            << " and serves again; '" << configured.name << "' keeps its recorded state\n";
  return BaseSpec{serving->name, serving->path, dtype};
}

// Candidate and previous bases of the registry load again in the background.
void reload_other_bases(Registry& registry, BaseSet& bases, const std::string& serving) {
  Result<std::vector<BaseModelRecord>> all = registry.list_base_models();
  if (!all.is_ok()) return;
  for (const BaseModelRecord& b : *all) {
    const bool keep = b.state == BaseModelState::kCandidate || b.state == BaseModelState::kPrevious ||
                      b.state == BaseModelState::kLoading;  // a load cut short by a restart
    if (b.name == serving || !keep) continue;
    Result<WeightType> dtype = parse_weight_type(b.dtype);
    Status s = dtype.is_ok() ? bases.add(BaseSpec{b.name, b.path, *dtype},
                                         b.state == BaseModelState::kPrevious ? BaseState::kPrevious
                                                                              : BaseState::kCandidate)
                             : dtype.status();
    if (!s.is_ok()) std::cerr << "loragate: base '" << b.name << "' is not reloaded: " << s.message() << "\n";
  }
}

// Config preloads and scenarios, for the serving base (a preload already registered is kept).
Status apply_config_registrations(const ServeConfig& c, Registry& registry, const ServingBase& base, AdminApi& admin) {
  for (const PreloadAdapter& p : c.preload) {
    if (base.adapters()->contains(p.name)) continue;
    LG_RETURN_IF_ERROR(admin.register_adapter(p.name, p.path).status().with_context("adapters.preload '" + p.name + "'"));
  }
  for (const auto& [scenario, adapter] : c.scenarios) {
    LG_RETURN_IF_ERROR(
        registry.set_scenario(scenario, base.name(), adapter).status().with_context("scenarios." + scenario));
  }
  return Status::ok();
}

// A folder written by `loragate quantize` holds one weight type: with model.dtype
// left at its default (f32, which such a folder cannot be held as), serve it as
// that type. Any other dtype asked for is kept, and a mismatch is refused at load.
Status serve_quantized_as_written(ServeConfig& c) {
  if (c.engine.weight_dtype != WeightType::kF32) return Status::ok();
  Result<std::unique_ptr<WeightStore>> store = WeightStore::open_dir(c.model_path);
  if (!store.is_ok()) return Status::ok();  // the load says what is wrong, with its context
  LG_ASSIGN_OR_RETURN(std::optional<WeightType> written, quantized_file_type(**store));
  if (written) {
    c.engine.weight_dtype = *written;
    std::cerr << "loragate: " << c.model_path << " was quantised to " << weight_type_name(*written)
              << ": serving it as " << weight_type_name(*written) << " (--dtype to choose)\n";
  }
  return Status::ok();
}

// "a, b, c and 4 more": a banner line stays readable with many names.
std::string some_names(const std::vector<std::string>& names, size_t most = 8) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > most) out += " and " + std::to_string(names.size() - most) + " more";
  return out.empty() ? "none" : out;
}

// Where this server's state lives and what it found there: every base the
// registry holds (and its state) and the adapters registered on each, so a
// server that restored an earlier run's bases or promotion says so.
std::string registry_banner(Registry& registry, const std::string& path, const BaseSet& bases) {
  std::ostringstream out;
  out << "loragate: registry " << registry_display_name(path) << "\n";
  Result<std::vector<BaseModelRecord>> records = registry.list_base_models();
  if (!records.is_ok()) return out.str() + "  (cannot list it: " + records.status().message() + ")\n";
  for (const BaseModelRecord& b : *records) {
    if (b.state == BaseModelState::kRetired) continue;
    std::vector<std::string> adapters;
    if (Result<std::vector<AdapterRecord>> a = registry.list_adapters(b.name); a.is_ok()) {
      for (const AdapterRecord& r : *a) adapters.push_back(r.name);
    }
    out << "  base " << b.name << " (" << base_model_state_name(b.state) << (bases.find(b.name).is_ok() ? ", loaded" : "")
        << "): "
        << adapters.size() << " adapter(s): " << some_names(adapters) << "\n";
  }
  return out.str();
}

int run_serve(const ServeFlags& f) {
  ServeConfig c;
  if (!f.config.empty()) {
    Result<ServeConfig> loaded = ServeConfig::load(f.config);
    if (!loaded.is_ok()) return fail(loaded.status().message());
    c = std::move(loaded).value();
  }
  if (!f.host.empty()) c.server.host = f.host;
  if (f.port >= 0) c.server.port = static_cast<uint16_t>(f.port);
  if (!f.model.empty()) c.model_path = f.model;
  if (!f.served_name.empty()) c.served_model_name = f.served_name;
  if (!f.admin_token.empty()) c.admin_token = f.admin_token;
  if (!f.registry.empty()) c.registry_path = f.registry;
  if (!f.adapter_roots.empty()) c.adapter_roots = f.adapter_roots;
  if (!f.base_roots.empty()) c.base_roots = f.base_roots;
  if (!f.eval_roots.empty()) c.eval_roots = f.eval_roots;
  if (!f.training_roots.empty()) c.training_roots = f.training_roots;
  if (!f.replica_url.empty()) c.fleet_url = f.replica_url;
  if (!f.dtype.empty()) {
    Result<WeightType> dtype = parse_weight_type(f.dtype);
    if (!dtype.is_ok()) return fail("--dtype: " + dtype.status().message());
    c.engine.weight_dtype = *dtype;
  }
  if (f.prefix_caching) c.engine.prefix_caching = true;
  if (f.no_prefix_caching) c.engine.prefix_caching = false;

  const bool demo = c.model_path.empty();
  if (demo) {
    std::cerr << "loragate: no model configured: serving the built-in demo from " << c.demo_dir << "\n";
    Result<Demo> d = ensure_demo(c.demo_dir);
    if (!d.is_ok()) return fail("demo: " + d.status().to_string());
    apply_demo(*d, c);
  }
  if (c.served_model_name.empty()) {
    c.served_model_name = std::filesystem::path(c.model_path).lexically_normal().filename().string();
    if (c.served_model_name.empty()) c.served_model_name = "base";
  }
  c.registry_path = c.resolved_registry_path();
  if (f.dtype.empty()) {
    if (Status s = serve_quantized_as_written(c); !s.is_ok()) return fail(s.to_string());
  }

  // The configured suite and gates are read once, before anything loads: a run authorises
  // promote only when it used the same content.
  Result<eval::PromotionRequirements> required = eval::load_promotion_requirements(c.eval_suite, c.eval_gates);
  if (!required.is_ok()) return fail(required.status().to_string());
  Result<std::unique_ptr<Registry>> registry = open_registry(c);
  if (!registry.is_ok()) return fail(registry.status().to_string());
  Result<BaseSpec> first = initial_base(c, **registry);
  if (!first.is_ok()) return fail(first.status().to_string());

  BaseSet bases({c.engine, c.candidate_share, c.resolved_memory_budget_bytes()}, registry->get());
  if (Status s = bases.start_serving(*first, "start-up"); !s.is_ok()) {
    // The promoted base no longer loads (files moved?): serve the configured one rather than nothing.
    if (first->name == c.served_model_name) return fail(s.to_string());
    std::cerr << "loragate: base '" << first->name << "' does not load (" << s.message() << "); serving '"
              << c.served_model_name << "' from model.path instead\n";
    if (Status again = bases.start_serving({c.served_model_name, c.model_path, c.engine.weight_dtype}, "start-up");
        !again.is_ok()) {
      return fail(again.to_string());
    }
  }
  // Not kept: a held reference would keep this base loaded after it is removed.
  std::shared_ptr<ServingBase> serving = bases.serving();
  reload_other_bases(**registry, bases, serving->name());

  Result<std::unique_ptr<RegistryModelResolver>> routes = RegistryModelResolver::create(registry->get());
  if (!routes.is_ok()) return fail(routes.status().to_string());
  RegistryModelResolver& resolver = **routes;
  ShadowTraffic shadow(&bases, &resolver);
  Result<std::unique_ptr<EvaluationStore>> evaluations = EvaluationStore::open(c.registry_path);
  if (!evaluations.is_ok()) return fail(evaluations.status().to_string());
  eval::EvaluationJobs jobs(&bases, registry->get(), evaluations->get(),
                            eval::EvaluationOptions{c.eval_roots, c.eval_max_running});
  jobs.set_live_source([&shadow](const std::string& candidate) { return shadow.live_arm(candidate); });
  if (c.require_evaluation) {
    bases.set_promote_check([&registry = **registry, &store = **evaluations, required = *required](
                                const ServingBase& serving, const ServingBase& candidate) {
      return eval::promotion_blockers(registry, store, required, {serving.name(), serving.sha256()},
                                      {candidate.name(), candidate.sha256()});
    });
  }
  Metrics metrics(&bases);
  AdminOptions admin_options;
  admin_options.token = c.resolved_admin_token();
  admin_options.adapter_roots = c.adapter_roots;
  admin_options.base_roots = c.resolved_base_roots();
  admin_options.eval_roots = c.eval_roots;
  admin_options.served_name = c.served_model_name;
  admin_options.training_roots = c.training_roots;
  AdminApi admin(admin_options, registry->get(), &bases, &metrics, &jobs, evaluations->get());
  admin.set_shadow_traffic(&shadow);
  admin.set_route_cache(&resolver);
  Result<std::unique_ptr<UpgradeStore>> upgrade_store = UpgradeStore::open(c.registry_path);
  if (!upgrade_store.is_ok()) return fail(upgrade_store.status().to_string());
  eval::UpgradeOptions upgrade_options;
  // Absolute: the folders it writes are registered as adapter paths, read again after a restart.
  upgrade_options.trained_dir = std::filesystem::absolute(c.resolved_training_dir()).lexically_normal().string();
  // Absolute, as a suite named on the admin API is: its relative paths are resolved against its folder.
  auto absolute = [](const std::string& p) {
    return p.empty() ? p : std::filesystem::absolute(p).lexically_normal().string();
  };
  upgrade_options.suite_path = absolute(c.eval_suite);
  upgrade_options.gates_path = absolute(c.eval_gates);
  upgrade_options.eval_roots = c.eval_roots;
  upgrade_options.training_roots = c.training_roots;
  upgrade_options.training_roots.insert(upgrade_options.training_roots.end(), c.adapter_roots.begin(),
                                        c.adapter_roots.end());
  // Declared after everything it uses, so it is stopped (and its worker joined) before they go.
  eval::UpgradeJobs upgrades(&bases, registry->get(), &jobs, evaluations->get(), upgrade_store->get(),
                             admin.upgrade_hooks(), upgrade_options);
  admin.set_upgrades(&upgrades);
  // A fleet replica: converges on the shared registry and rolls promotes across the fleet.
  std::unique_ptr<FleetMember> fleet;
  std::unique_ptr<FleetRollout> rollout;
  if (c.is_fleet_replica()) {
    if (c.fleet_url.empty() && c.server.port == 0) {
      return fail("a fleet replica needs a fixed --port (or fleet.url / --replica-url): the others reach it there");
    }
    FleetOptions fo;
    fo.url = !c.fleet_url.empty() ? c.fleet_url : "http://" + c.server.host + ":" + std::to_string(c.server.port);
    fo.heartbeat = std::chrono::milliseconds(c.fleet_heartbeat_ms);
    fo.lost_after = std::chrono::milliseconds(c.fleet_lost_after_ms);
    fo.reconcile = std::chrono::milliseconds(c.fleet_reconcile_ms);
    fleet = std::make_unique<FleetMember>(fo, registry->get(), &bases, [&resolver] {
      if (Status s = resolver.reload(); !s.is_ok()) std::cerr << "loragate fleet: routes: " << s.to_string() << "\n";
    });
    RolloutOptions ro;
    ro.max_unavailable = c.fleet_max_unavailable;
    ro.swap_timeout = std::chrono::milliseconds(c.fleet_swap_timeout_s * 1000);
    ro.admin_token = c.resolved_admin_token();
    rollout = std::make_unique<FleetRollout>(ro, fleet.get(), registry->get(), &bases);
    admin.set_fleet(fleet.get(), rollout.get());
  }
  if (Status s = apply_config_registrations(c, **registry, *serving, admin); !s.is_ok()) return fail(s.message());
  if (Status s = resolver.reload(); !s.is_ok()) return fail(s.to_string());  // the configured scenarios
  const std::string fingerprint = serving->fingerprint();
  const size_t num_adapters = serving->adapters()->list().size();
  serving.reset();

  GatewayOptions go;
  go.server = c.server;
  go.served_model_name = c.served_model_name;
  go.admin_token = c.resolved_admin_token();
  Result<std::unique_ptr<Gateway>> gateway = Gateway::create(go, &bases, &resolver);
  if (!gateway.is_ok()) return fail(gateway.status().to_string());
  Gateway& gw = **gateway;
  admin.install(gw.router(), gw.blocking_work());
  const ListingAccess listing_access{c.server.public_listings, c.resolved_admin_token()};
  gw.router().add(http::verb::get, "/metrics", [&metrics, listing_access](const std::shared_ptr<Exchange>& ex) {
    handle_metrics(metrics, listing_access, ex);
  });
  gw.set_observer(&metrics);
  gw.set_shadow_traffic(&shadow);
  Result<uint16_t> port = gw.start();
  if (!port.is_ok()) return fail(port.status().to_string());
  gw.stop_on_signals();
  if (fleet) {
    fleet->start();
    std::cout << "loragate: fleet replica " << fleet->options().url << " (registry "
              << registry_display_name(c.registry_path) << ")\n";
  }

  const std::string url = "http://" + c.server.host + ":" + std::to_string(*port);
  std::cout << "loragate: serving '" << c.served_model_name << "' (base " << fingerprint << ") on " << url << " ("
            << num_adapters << " adapters; prefix caching " << (c.engine.prefix_caching ? "on" : "off")
            << "; admin routes "
            << (c.resolved_admin_token().empty() ? "disabled: no token" : "enabled") << ")\n";
  std::cout << registry_banner(**registry, c.registry_path, bases);
  const std::string example_model = demo ? "support-bot" : c.served_model_name;
  std::cout << "try:\n  curl -s " << url << "/v1/completions -H 'Content-Type: application/json' \\\n"
            << "    -d '{\"model\": \"" << example_model << "\", \"prompt\": \"Once upon a time\", \"max_tokens\": 16}'\n"
            << std::flush;
  gw.wait();
  if (fleet) fleet->stop();
  // An evaluation runs for minutes: never past the shutdown deadline. It ends
  // at its next engine request and is stored as cancelled (run it again later).
  upgrades.cancel_all();  // first: it is recorded interrupted (resumable), not failed by its evaluation's end
  jobs.cancel_all();
  std::cout << "loragate: stopped\n";
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the OpenAI-compatible gateway (the demo model when none is configured)");
  cmd->add_option("--config", f->config, "YAML config (see configs/loragate.yaml)")->check(CLI::ExistingFile);
  cmd->add_option("--host", f->host, "Address to bind (overrides server.host)");
  cmd->add_option("--port", f->port, "TCP port (overrides server.port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--model", f->model, "Hugging Face model directory (overrides model.path)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--dtype", f->dtype,
                  "Weight storage (overrides model.dtype): f32, bf16, int8, int8-outlier, int4, int4-g64, int4-asym, "
                  "int4-asym-g64; a `loragate quantize` folder is served as its own type by default");
  cmd->add_option("--served-name", f->served_name, "The base model's name in requests (overrides model.served_name)");
  cmd->add_option("--admin-token", f->admin_token, "Admin bearer token (overrides auth.admin_token)");
  cmd->add_option("--registry", f->registry, "SQLite registry file (overrides adapters.registry)");
  cmd->add_option("--adapter-root", f->adapter_roots,
                  "Directory adapters may be registered from (overrides adapters.roots; repeatable)");
  cmd->add_option("--eval-root", f->eval_roots,
                  "Directory evaluation suites and gates may be read from (overrides evaluation.roots; repeatable)");
  cmd->add_option("--training-root", f->training_roots,
                  "Directory scenarios' training sets may be read from (overrides training.roots; repeatable)");
  cmd->add_option("--replica-url", f->replica_url,
                  "This replica's address for the fleet and its proxy (overrides fleet.url; default http://HOST:PORT)");
  cmd->add_option("--base-root", f->base_roots, "Directory candidate bases may be loaded from (overrides bases.roots; repeatable)");
  CLI::Option* caching = cmd->add_flag("--prefix-caching", f->prefix_caching,
                                       "Reuse the KV of prompt prefixes computed before (overrides engine.prefix_caching)");
  cmd->add_flag("--no-prefix-caching", f->no_prefix_caching,
                "Compute every prompt from scratch (overrides engine.prefix_caching)")
      ->excludes(caching);
  cmd->callback([f] {
    if (int rc = run_serve(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace loragate::cli

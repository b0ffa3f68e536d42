// `loragate serve`: the gateway. Loads the base model (or synthesises the
// demo), restores adapters and scenarios from the SQLite registry, applies
// the config's preloads and scenarios, and serves the OpenAI, admin and
// metrics routes until SIGINT/SIGTERM, then drains and exits 0.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/demo.h"
#include "cli/serve_config.h"
#include "engine/engine_loop.h"
#include "gateway/admin_api.h"
#include "gateway/gateway.h"
#include "gateway/metrics.h"
#include "gateway/registry_resolver.h"
#include "registry/registry.h"

namespace loragate::cli {
namespace {

struct ServeFlags {
  std::string config;
  std::string host, model, served_name, admin_token, registry;
  int port = -1;
};

Status open_registry(const ServeConfig& c, std::unique_ptr<Registry>* out) {
  const std::filesystem::path parent = std::filesystem::path(c.registry_path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  LG_ASSIGN_OR_RETURN(*out, Registry::open(c.registry_path));
  BaseModelRecord base;
  base.name = c.served_model_name;
  base.path = c.model_path;
  base.state = BaseModelState::kOnline;
  return (*out)->upsert_base_model(base).status();
}

// Registered adapters come back from the registry; config preloads and
// scenarios are applied on top (a preload already registered is kept).
Status restore_registrations(const ServeConfig& c, Registry& registry, AdapterCache& cache, AdminApi& admin) {
  LG_ASSIGN_OR_RETURN(std::vector<AdapterRecord> adapters, registry.list_adapters(c.served_model_name));
  for (const AdapterRecord& a : adapters) {
    if (a.state != AdapterState::kReady) continue;
    LG_RETURN_IF_ERROR(cache.add(a.name, a.path).with_context("restoring adapter '" + a.name + "'"));
  }
  for (const PreloadAdapter& p : c.preload) {
    if (cache.contains(p.name)) continue;
    LG_RETURN_IF_ERROR(admin.register_adapter(p.name, p.path).status().with_context("adapters.preload '" + p.name + "'"));
  }
  for (const auto& [scenario, adapter] : c.scenarios) {
    LG_RETURN_IF_ERROR(registry.set_scenario(scenario, c.served_model_name, adapter)
                           .status()
                           .with_context("scenarios." + scenario));
  }
  return Status::ok();
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

  Result<std::unique_ptr<Engine>> engine = Engine::load(c.model_path, c.engine);
  if (!engine.is_ok()) return fail(engine.status().to_string());
  AdapterCache* cache = (*engine)->adapters();
  if (cache == nullptr) return fail("engine.max_loras must be > 0 to serve adapters");
  EngineLoop loop(std::move(engine).value());

  std::unique_ptr<Registry> registry;
  if (Status s = open_registry(c, &registry); !s.is_ok()) return fail(s.to_string());
  Metrics metrics([&loop] { return loop.stats(); }, cache);
  AdminApi admin({c.resolved_admin_token(), c.adapter_roots, c.served_model_name}, registry.get(), cache, &metrics);
  if (Status s = restore_registrations(c, *registry, *cache, admin); !s.is_ok()) return fail(s.message());
  RegistryModelResolver resolver(registry.get(), c.served_model_name);

  GatewayOptions go;
  go.server = c.server;
  go.served_model_name = c.served_model_name;
  go.model_dir = c.model_path;
  Result<std::unique_ptr<Gateway>> gateway = Gateway::create(go, &loop, &resolver);
  if (!gateway.is_ok()) return fail(gateway.status().to_string());
  Gateway& gw = **gateway;
  admin.install(gw.router());
  gw.router().add(http::verb::get, "/metrics", [&metrics](const std::shared_ptr<Exchange>& ex) {
    HttpResponse r{http::status::ok, 11};
    r.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    r.body() = metrics.render();
    ex->respond(std::move(r));
  });
  gw.set_observer(&metrics);
  Result<uint16_t> port = gw.start();
  if (!port.is_ok()) return fail(port.status().to_string());
  gw.stop_on_signals();

  const std::string url = "http://" + c.server.host + ":" + std::to_string(*port);
  std::cout << "loragate: serving '" << c.served_model_name << "' on " << url << " (" << cache->list().size()
            << " adapters; admin routes " << (c.resolved_admin_token().empty() ? "disabled: no token" : "enabled")
            << ")\n";
  const std::string example_model = demo ? "support-bot" : c.served_model_name;
  std::cout << "try:\n  curl -s " << url << "/v1/completions -H 'Content-Type: application/json' \\\n"
            << "    -d '{\"model\": \"" << example_model << "\", \"prompt\": \"Once upon a time\", \"max_tokens\": 16}'\n"
            << std::flush;
  gw.wait();
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
  cmd->add_option("--served-name", f->served_name, "The base model's name in requests (overrides model.served_name)");
  cmd->add_option("--admin-token", f->admin_token, "Admin bearer token (overrides auth.admin_token)");
  cmd->add_option("--registry", f->registry, "SQLite registry file (overrides adapters.registry)");
  cmd->callback([f] {
    if (int rc = run_serve(*f); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace loragate::cli

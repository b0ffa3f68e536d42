// ServeConfig: everything `loragate serve` needs, read from one YAML file
// (configs/loragate.yaml documents every key) and overridden by flags.
//
// Every key is validated: an unknown key or a value of the wrong type or
// range is an error naming the key path (e.g. "engine.max_loras").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "gateway/http/server_options.h"

namespace loragate {

struct PreloadAdapter {
  std::string name;
  std::string path;
};

struct ServeConfig {
  ServerOptions server;                         // server.*
  std::string model_path;                       // model.path; "" = the built-in demo model
  std::string served_model_name;                // model.served_name; "" = the model directory's name
  EngineOptions engine;                         // model.dtype and engine.*
  double candidate_share = 0.25;                // engine.candidate_share: a candidate base's share of compute time
                                                // while the serving base has work (all of them when it is idle)
  int64_t memory_budget_mib = 0;                // engine.memory_budget_mib: weights + KV + adapters of every
                                                // loaded base; 0 = 80% of physical memory
  std::vector<std::string> base_roots;          // bases.roots: candidate base paths must lie inside one;
                                                // empty = the directory holding model.path
  std::vector<std::string> eval_roots;          // evaluation.roots: suites and gates files must lie inside one
  bool require_evaluation = true;               // evaluation.require_pass_to_promote: promote needs a passing
                                                // run of the candidate against the serving base (or force)
  std::string eval_suite;                       // evaluation.suite: the suite a run must have used (by content
                                                // hash) to authorise promote; "" = any covering the scenarios
  std::string eval_gates;                       // evaluation.gates: the gates a run must have used (by content
                                                // hash); "" = the shipped defaults
  int32_t eval_max_running = 1;                 // evaluation.max_running: evaluations running at once
  std::vector<std::string> adapter_roots;       // adapters.roots: registered paths must lie inside one
  std::vector<std::string> training_roots;      // training.roots: scenarios' training sets must lie inside one
                                                // (or inside an adapters.roots)
  std::string training_dir;                     // training.dir: where upgrades write retrained adapters;
                                                // "" = trained/ beside the registry file
                                                // (.cache/loragate/trained for a PostgreSQL registry)
  // adapters.registry: the SQLite file, or a "postgresql://" URL (registry.h);
  // "" = the model's own (resolved_registry_path): runs of unrelated models
  // never share one by accident.
  std::string registry_path;
  std::string fleet_enabled = "auto";            // fleet.enabled: true | false | auto (= a postgresql:// registry)
  std::string fleet_url;                        // fleet.url: this replica's address for the others and the proxy;
                                                // "" = http://<server.host>:<port>
  int64_t fleet_heartbeat_ms = 1000;            // fleet.heartbeat_ms
  int64_t fleet_lost_after_ms = 3000;           // fleet.lost_after_ms: a replica silent this long is lost
  int64_t fleet_reconcile_ms = 5000;            // fleet.reconcile_ms: reconcile at least this often
  int32_t fleet_max_unavailable = 1;            // fleet.max_unavailable: replicas swapping at once in a rollout
  int64_t fleet_swap_timeout_s = 120;           // fleet.swap_timeout_s: to load and serve the candidate per replica
  std::vector<PreloadAdapter> preload;          // adapters.preload: registered at start when absent
  std::map<std::string, std::string> scenarios; // scenarios: name -> adapter, for the base served
  std::string admin_token;                      // auth.admin_token; "" = read auth.admin_token_env
  std::string admin_token_env = "LORAGATE_ADMIN_TOKEN";  // auth.admin_token_env
  std::string demo_dir = ".cache/loragate/demo";          // demo.dir: where the demo model is synthesised

  // Parses YAML text; `source` names the file in errors.
  static Result<ServeConfig> parse(const std::string& yaml_text, const std::string& source);
  static Result<ServeConfig> load(const std::string& path);
  // The admin token after the environment is consulted ("" = admin routes disabled).
  std::string resolved_admin_token() const;
  // memory_budget_mib in bytes, with 0 resolved against this machine's memory.
  int64_t resolved_memory_budget_bytes() const;
  // bases.roots, or the directory holding model.path when none is set.
  std::vector<std::string> resolved_base_roots() const;
  // Whether this server is a fleet replica: fleet.enabled, where auto means
  // "the registry is a PostgreSQL server".
  bool is_fleet_replica() const;
  // training.dir, or trained/ in the directory of the registry file.
  std::string resolved_training_dir() const;
  // adapters.registry, or where this model keeps its own when none is set:
  // .cache/loragate/<served name>-<8 hex of the model's absolute path>/registry.db
  // (the demo's lies in demo.dir). Needs model_path; served_model_name may be "".
  std::string resolved_registry_path() const;
};

}  // namespace loragate

// `loragate upgrade`: move to a candidate base in one command.
//
// Against a running server (--url): POST /admin/upgrades, then poll it,
// printing each scenario's retraining as it goes, the verdict, the report's
// path and the gates that failed. Exit 0 when it passed (and, with
// --promote, was promoted), 1 when it ended otherwise, 2 on an error.
//
// Offline (--online DIR): no server. The --scenarios file is an eval suite
// (evaluator/suite.h) whose scenarios also name their online adapter
// (`adapter:`) and training set (`train:`, `train_config:`); every adapter is
// retrained on the candidate into --out, then the comparison runs in process
// as `loragate eval run` does, its verdict stored and printed (exit 0 pass,
// 1 fail, 3 inconclusive, 2 error).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/admin_client.h"
#include "cli/commands.h"
#include "cli/eval_output.h"
#include "cli/history_db.h"
#include "common/sha256.h"
#include "evaluator/arm_engine.h"
#include "evaluator/gates.h"
#include "evaluator/run_history.h"
#include "evaluator/runner.h"
#include "evaluator/suite.h"
#include "registry/evaluation_store.h"
#include "registry/registry.h"
#include "upgrade/retrain.h"

namespace loragate::cli {
namespace {

using nlohmann::json;

constexpr int kExitPass = 0, kExitFail = 1, kExitError = 2, kExitInconclusive = 3;

struct UpgradeFlags {
  std::shared_ptr<AdminOptions> admin;  // --url, --token, --json, --timeout
  std::string candidate, path, dtype = "f32";
  bool promote = false, skip_untrained = false;
  std::string strategy;  // "" = transfer-first with a server, retrain-all offline
  // Offline.
  std::string online, scenarios, out, gates, db = kOfflineHistoryDb;
  std::string online_name = "online", candidate_name = "candidate";
  std::string json_out, html_out;
};

std::string absolute_here(const std::string& p) {
  std::error_code ec;
  if (p.empty() || !std::filesystem::path(p).is_relative() || !std::filesystem::exists(p, ec)) return p;
  return std::filesystem::absolute(p, ec).lexically_normal().string();
}

// One line per scenario whenever its state changes, its training progress and
// the evaluation's every few seconds; each line starts with the time since the
// upgrade was asked for.
class StepPrinter {
 public:
  explicit StepPrinter(bool quiet) : quiet_(quiet), start_(std::chrono::steady_clock::now()) {}
  void show(const json& upgrade) {
    if (quiet_) return;
    const std::string state = upgrade.value("state", "");
    const auto now = std::chrono::steady_clock::now();
    for (const json& s : upgrade.value("steps", json::array())) {
      const std::string name = s.value("scenario", ""), step_state = s.value("state", "");
      const bool changed = seen_[name] != step_state;
      const bool progress = step_state == "training" && now - last_progress_[name] > std::chrono::seconds(3);
      if (!changed && !progress) continue;
      seen_[name] = step_state;
      last_progress_[name] = now;
      std::printf("%s  %-12s %-10s", stamp().c_str(), name.c_str(), step_state.c_str());
      if (s.value("total_steps", 0) > 0) {
        std::printf(" step %lld/%lld loss %.4f", s.value("step", 0LL), s.value("total_steps", 0LL),
                    s.value("loss", 0.0));
      }
      if (s.value("reused", false)) std::printf(" (already trained: reused)");
      if (step_state == "registered") {
        std::printf(" -> %s", s.value("out_dir", "").c_str());
        if (!s.value("outcome", "").empty()) std::printf(" (%s)", s.value("outcome", "").c_str());
      }
      if (step_state == "pending" && !s.value("transfer", "").empty()) {
        std::printf(" transfer: %s", s.value("transfer", "").c_str());
      }
      if (s.contains("error")) std::printf(": %s", s.value("error", "").c_str());
      std::printf("\n");
    }
    for (const json& stage : upgrade.value("stages", json::array())) {
      const std::string name = stage.value("name", ""), stage_state = stage.value("state", "");
      if (stage_seen_[name] == stage_state || stage_state == "pending") continue;
      stage_seen_[name] = stage_state;
      std::printf("%s stage %-9s %s", stamp().c_str(), name.c_str(), stage_state.c_str());
      if (stage_state != "running" && stage.value("seconds", 0.0) > 0) std::printf(" in %.1f s", stage.value("seconds", 0.0));
      if (!stage.value("note", "").empty()) std::printf(": %s", stage.value("note", "").c_str());
      std::printf("\n");
    }
    if (state != last_state_) {
      std::printf("%s upgrade %lld: %s\n", stamp().c_str(), upgrade.value("id", 0LL), state.c_str());
      last_state_ = state;
      last_eval_ = now;
    }
    const json progress = upgrade.value("evaluation_progress", json::object());
    if (progress.value("total", 0LL) > 0 && now - last_eval_ > std::chrono::seconds(3)) {
      last_eval_ = now;
      std::printf("%s  evaluating %lld/%lld units\n", stamp().c_str(), progress.value("done", 0LL),
                  progress.value("total", 0LL));
    }
    std::fflush(stdout);
  }
  // "[  12.3 s]": the time since the upgrade was asked for.
  std::string stamp() const {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "[%6.1f s]",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    return buf;
  }

 private:
  bool quiet_;
  std::chrono::steady_clock::time_point start_, last_eval_;
  std::string last_state_;
  std::map<std::string, std::string> seen_, stage_seen_;
  std::map<std::string, std::chrono::steady_clock::time_point> last_progress_;
};

bool is_finished(const std::string& state) {
  return state == "passed" || state == "failed" || state == "promoted" || state == "cancelled" ||
         state == "interrupted";
}

// Server mode: the exit code.
Result<int> upgrade_on_server(const UpgradeFlags& f) {
  const AdminOptions& o = *f.admin;
  json body = {{"candidate", f.candidate}, {"path", absolute_here(f.path)}, {"promote", f.promote},
               {"skip_untrained", f.skip_untrained}, {"dtype", f.dtype}, {"by", env_actor()},
               {"strategy", f.strategy.empty() ? "transfer-first" : f.strategy}};
  LG_ASSIGN_OR_RETURN(json upgrade, admin_call(o, "POST", "/admin/upgrades", body));
  const std::string target = "/admin/upgrades/" + std::to_string(upgrade.value("id", 0LL));
  StepPrinter printer(o.json);
  for (;;) {
    printer.show(upgrade);
    if (is_finished(upgrade.value("state", ""))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    LG_ASSIGN_OR_RETURN(upgrade, admin_call(o, "GET", target));
  }
  const std::string state = upgrade.value("state", "");
  if (o.json) {
    std::cout << upgrade.dump(2) << "\n";
  } else {
    if (upgrade.contains("gates") && upgrade["gates"].is_array()) print_gate_lines(upgrade["gates"]);
    if (upgrade.contains("verdict") && upgrade["verdict"].is_string()) {
      std::printf("verdict: %s (evaluation run %lld)\n", upgrade["verdict"].get<std::string>().c_str(),
                  upgrade.value("evaluation", 0LL));
    }
    if (upgrade.contains("report") && upgrade["report"].is_string()) {
      std::printf("reports: %s (JSON), %s (HTML)\n", upgrade["report"].get<std::string>().c_str(),
                  upgrade.value("report_html", "").c_str());
    }
    if (upgrade.contains("error") && upgrade["error"].is_string()) {
      std::printf("%s: %s\n", state.c_str(), upgrade["error"].get<std::string>().c_str());
    }
    std::printf("%s upgrade %lld %s\n", printer.stamp().c_str(), upgrade.value("id", 0LL), state.c_str());
  }
  const bool ok = f.promote ? state == "promoted" : state == "passed";
  return ok ? kExitPass : kExitFail;
}

Result<json> read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::invalid_argument(path + ": not a JSON object");
  return j;
}

// Offline: the exit code of the verdict.
Result<int> upgrade_offline(const UpgradeFlags& f) {
  LG_ASSIGN_OR_RETURN(eval::Suite suite, eval::load_suite(f.scenarios));
  for (const eval::ScenarioSpec& s : suite.scenarios) {
    if (s.adapter_path.empty() || s.train_path.empty()) {
      return Status::invalid_argument(f.scenarios + ": scenario '" + s.name + "' needs `adapter:` (its online " +
                                      "adapter) and `train:` (its training set) for an upgrade");
    }
  }
  eval::GateConfig gates = eval::GateConfig::defaults();
  if (!f.gates.empty()) {
    LG_ASSIGN_OR_RETURN(gates, eval::GateConfig::load(f.gates));
  }
  EngineOptions options;
  options.max_loras = 4;
  options.kv_cache_bytes = 64ll << 20;
  EngineOptions candidate_options = options;
  LG_ASSIGN_OR_RETURN(candidate_options.weight_dtype, parse_weight_type(f.dtype));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<eval::ArmEngine> online, eval::load_offline_arm(f.online_name, f.online, options));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<eval::ArmEngine> candidate,
                      eval::load_offline_arm(f.candidate_name, f.candidate, candidate_options));

  // Retrain every scenario's adapter on the candidate.
  const std::string root = f.out.empty() ? ".cache/loragate/trained/" + f.candidate_name : f.out;
  const eval::RetrainBase base{f.candidate, candidate_options.weight_dtype, candidate->sha256()};
  std::map<std::string, std::string> retrained;
  for (const eval::ScenarioSpec& s : suite.scenarios) {
    eval::RetrainSpec spec{s.name, s.train_path, "", json::object(), ""};
    if (!s.train_config_path.empty()) {
      LG_ASSIGN_OR_RETURN(spec.config, read_json_file(s.train_config_path));
    }
    std::printf("  %-12s training on %s\n", s.name.c_str(), f.candidate_name.c_str());
    std::fflush(stdout);
    auto last = std::chrono::steady_clock::now();
    auto on_step = [&](const train::TrainProgress& p) {
      const auto now = std::chrono::steady_clock::now();
      if (p.step != p.total_steps && now - last < std::chrono::seconds(3)) return;
      last = now;
      std::printf("  %-12s step %lld/%lld loss %.4f  %.0f tokens/s  ETA %.0f s\n", s.name.c_str(),
                  static_cast<long long>(p.step), static_cast<long long>(p.total_steps), p.loss, p.tokens_per_s,
                  p.eta_s);
      std::fflush(stdout);
    };
    LG_ASSIGN_OR_RETURN(eval::RetrainOutcome out, eval::retrain_adapter(base, spec, root, {}, on_step));
    std::printf("  %-12s %s -> %s\n", s.name.c_str(), out.reused ? "already trained (reused)" : "trained",
                out.dir.c_str());
    retrained[s.name] = out.dir;
  }

  // Then the comparison, as `loragate eval run` makes it.
  make_parent_folder(f.db);
  LG_ASSIGN_OR_RETURN(std::unique_ptr<EvaluationStore> store, EvaluationStore::open(f.db));
  std::map<std::string, std::string> online_adapters;
  for (const eval::ScenarioSpec& s : suite.scenarios) online_adapters[s.name] = s.adapter_path;
  ProgressBar bar;
  eval::RunnerOptions ro;
  ro.adapter_for = [&](const std::string& scenario, bool is_candidate) -> Result<eval::AdapterChoice> {
    const auto& dirs = is_candidate ? retrained : online_adapters;
    auto it = dirs.find(scenario);
    if (it == dirs.end()) return Status::not_found("no adapter for scenario '" + scenario + "'");
    return eval::AdapterChoice{scenario, it->second};
  };
  ro.progress = [&bar](int64_t done, int64_t total) { bar.update(done, total); };
  LG_ASSIGN_OR_RETURN(eval::RunResult run, eval::run_suite(suite, *online, *candidate, ro));
  LG_ASSIGN_OR_RETURN(run, eval::judge_and_store(std::move(run), gates, *store));
  print_summary(run);
  LG_RETURN_IF_ERROR(write_run_reports(run, f.json_out, f.html_out, (std::filesystem::path(root) / "reports").string()));
  switch (run.verdict) {
    case eval::Verdict::kPass: return kExitPass;
    case eval::Verdict::kFail: return kExitFail;
    default: return kExitInconclusive;
  }
}

}  // namespace

void add_upgrade_command(CLI::App& app) {
  auto f = std::make_shared<UpgradeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "upgrade", "Judge a candidate base, carry each scenario's adapter over (or retrain it), evaluate, and promote "
                 "when it passes");
  f->admin = add_admin_options(cmd);
  cmd->add_option("--candidate", f->candidate,
                  "With --url: the candidate base's name (loaded from --path if not yet); offline: its directory")
      ->required();
  cmd->add_option("--path", f->path, "The candidate's model directory, as the server sees it (with --url)");
  cmd->add_flag("--promote", f->promote, "Promote the candidate when the evaluation passes (with --url)");
  cmd->add_flag("--skip-untrained", f->skip_untrained,
                "Scenarios without a training set do not block the upgrade (with --url)");
  cmd->add_option("--dtype", f->dtype, "The candidate's weight storage when it is loaded")->capture_default_str();
  cmd->add_option("--strategy", f->strategy,
                  "transfer-first (default with --url: try each online adapter on the candidate, retrain only what "
                  "fails, warm-started) or retrain-all (offline: the only one)")
      ->check(CLI::IsMember({"transfer-first", "retrain-all"}));
  cmd->add_option("--online", f->online, "Offline: the online base's directory (no server)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--scenarios", f->scenarios,
                  "Offline: the suite YAML, each scenario with `adapter:` and `train:` (and `train_config:`)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", f->out, "Offline: where retrained adapters go (default .cache/loragate/trained/<name>)");
  cmd->add_option("--gates", f->gates, "Offline: gates YAML (default: the built-in gates)")->check(CLI::ExistingFile);
  cmd->add_option("--db", f->db, "Offline: registry file that keeps the evaluation history")->capture_default_str();
  cmd->add_option("--online-name", f->online_name, "Offline: the online base's name in reports")->capture_default_str();
  cmd->add_option("--candidate-name", f->candidate_name, "Offline: the candidate's name in reports")
      ->capture_default_str();
  cmd->add_option("--report-json", f->json_out, "Offline: write the JSON report here");
  cmd->add_option("--report-html", f->html_out, "Offline: write the HTML report here");
  cmd->callback([f] {
    Result<int> code = Status::internal("no mode");
    if (!f->online.empty()) {
      if (f->scenarios.empty()) {
        code = Status::invalid_argument("--online needs --scenarios FILE");
      } else if (f->strategy == "transfer-first") {
        code = Status::unsupported("--strategy transfer-first runs inside a server (--url); offline, every adapter "
                                   "is retrained (retrain-all)");
      } else {
        code = upgrade_offline(*f);
      }
    } else if (f->path.empty()) {
      code = Status::invalid_argument("--path DIR is required with --url: the candidate's model directory");
    } else {
      code = upgrade_on_server(*f);
    }
    if (!code.is_ok()) {
      fail(code.status().message());
      throw CLI::RuntimeError(kExitError);
    }
    if (*code != 0) throw CLI::RuntimeError(*code);
  });
}

}  // namespace loragate::cli

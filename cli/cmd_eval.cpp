// `loragate eval run|ls|show`: the evaluator offline. `run` loads both bases
// in process, runs the suite's arms, judges them with the gates, stores the
// run in the registry file's history and writes the JSON / HTML reports;
// exit 0 pass, 1 fail, 3 inconclusive, 2 error. `show` re-judges a stored
// run from its items and checks the verdict is the stored one.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/admin_client.h"
#include "cli/commands.h"
#include "cli/eval_output.h"
#include "cli/history_db.h"
#include "common/sha256.h"
#include "common/weight_type.h"
#include "evaluator/arm_engine.h"
#include "evaluator/gates.h"
#include "evaluator/report.h"
#include "evaluator/run_history.h"
#include "evaluator/runner.h"
#include "evaluator/suite.h"
#include "registry/evaluation_store.h"
#include "registry/registry.h"
#include "upgrade/evaluation_jobs.h"

namespace loragate::cli {
namespace {

using nlohmann::json;

constexpr int kExitPass = 0, kExitFail = 1, kExitError = 2, kExitInconclusive = 3;

int exit_code(eval::Verdict v) {
  switch (v) {
    case eval::Verdict::kPass: return kExitPass;
    case eval::Verdict::kFail: return kExitFail;
    case eval::Verdict::kInconclusive: return kExitInconclusive;
    case eval::Verdict::kSkipped: return kExitInconclusive;  // a run's verdict is never skipped
  }
  return kExitError;
}

struct RunFlags {
  std::string url;  // server mode: the server evaluates its loaded candidate `candidate`
  std::string online, candidate, online_name = "online", candidate_name = "candidate";
  std::string suite, online_adapters, candidate_adapters, gates;
  std::string db = kOfflineHistoryDb;
  std::string json_out, html_out;
  std::string online_dtype = "f32", candidate_dtype = "f32";  // weight storage of each arm
  bool copied_adapter_arm = false;
  uint64_t seed = 1;
  int32_t latency_repeats = 1;  // offline: each item's generation timed this many times per arm
};

// Server mode: POST /admin/evaluations, then poll until it ends.
Result<eval::Verdict> run_remote(const RunFlags& f) {
  AdminOptions o;
  o.url = f.url;
  o.token = std::getenv("LORAGATE_ADMIN_TOKEN") != nullptr ? std::getenv("LORAGATE_ADMIN_TOKEN") : "";
  std::error_code ec;
  auto absolute = [&](const std::string& p) {  // the server does not share our working directory
    return p.empty() || !std::filesystem::exists(p, ec) ? p : std::filesystem::absolute(p, ec).lexically_normal().string();
  };
  json body = {{"candidate", f.candidate}, {"suite", absolute(f.suite)}};
  if (!f.gates.empty()) body["gates"] = absolute(f.gates);
  LG_ASSIGN_OR_RETURN(json job, admin_call(o, "POST", "/admin/evaluations", body));
  const std::string target = "/admin/evaluations/" + std::to_string(job.value("id", 0));
  ProgressBar bar;
  for (;;) {
    LG_ASSIGN_OR_RETURN(job, admin_call(o, "GET", target));
    bar.update(job.value("done", 0), job.value("total", 0));
    const std::string state = job.value("state", "");
    if (state == "failed") return Status::internal("the evaluation failed: " + job.value("error", std::string()));
    if (state == "cancelled") return Status::cancelled("the evaluation was cancelled (the server stopped); run it again");
    if (state == "done") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (const json& g : job.value("gates", json::array())) {
    if (g.value("verdict", "") == "pass") continue;
    std::printf("%-12s %s/%s: %s\n", g.value("verdict", "").c_str(), g.value("scenario", "").c_str(),
                g.value("metric", "").c_str(), g.value("why", "").c_str());
  }
  const std::string verdict = job.value("verdict", "");
  std::printf("verdict: %s (run %lld)\n", verdict.c_str(), static_cast<long long>(job.value("run", 0)));
  if (verdict == "pass") return eval::Verdict::kPass;
  if (verdict == "fail") return eval::Verdict::kFail;
  return eval::Verdict::kInconclusive;
}

Result<eval::Verdict> run_eval(const RunFlags& f) {
  if (!f.url.empty() && f.latency_repeats != 1) {
    return Status::invalid_argument("--latency-repeats is for offline runs; a server times its evaluations its own way");
  }
  if (!f.url.empty()) return run_remote(f);
  for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{"--online", f.online},
                                    {"--online-adapters", f.online_adapters},
                                    {"--candidate-adapters", f.candidate_adapters}}) {
    if (value.empty()) return Status::invalid_argument(std::string(flag) + " is required without --url");
  }
  LG_ASSIGN_OR_RETURN(eval::Suite suite, eval::load_suite(f.suite));
  eval::GateConfig gates = eval::GateConfig::defaults();
  if (!f.gates.empty()) {
    LG_ASSIGN_OR_RETURN(gates, eval::GateConfig::load(f.gates));
  }
  EngineOptions options;
  options.max_loras = 4;
  options.kv_cache_bytes = 64ll << 20;
  // A quantised candidate is often the online base itself in another storage.
  EngineOptions candidate_options = options;
  LG_ASSIGN_OR_RETURN(options.weight_dtype, parse_weight_type(f.online_dtype));
  LG_ASSIGN_OR_RETURN(candidate_options.weight_dtype, parse_weight_type(f.candidate_dtype));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<eval::ArmEngine> online, eval::load_offline_arm(f.online_name, f.online, options));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<eval::ArmEngine> candidate,
                      eval::load_offline_arm(f.candidate_name, f.candidate, candidate_options));
  make_parent_folder(f.db);
  LG_ASSIGN_OR_RETURN(std::unique_ptr<EvaluationStore> store, EvaluationStore::open(f.db));

  ProgressBar bar;
  eval::RunnerOptions ro;
  ro.online_adapters = f.online_adapters;
  ro.candidate_adapters = f.candidate_adapters;
  ro.copied_adapter_arm = f.copied_adapter_arm;
  ro.seed = f.seed;
  ro.latency_repeats = f.latency_repeats;
  ro.progress = [&bar](int64_t done, int64_t total) { bar.update(done, total); };
  LG_ASSIGN_OR_RETURN(eval::RunResult run, eval::run_suite(suite, *online, *candidate, ro));
  LG_ASSIGN_OR_RETURN(run, eval::judge_and_store(std::move(run), gates, *store));
  print_summary(run);
  LG_RETURN_IF_ERROR(write_run_reports(run, f.json_out, f.html_out, reports_dir_for(f.db)));
  return run.verdict;
}

// Judges a stored run again from its items; a differing verdict is an error.
Result<eval::Verdict> show_eval(const std::string& db, int64_t id, const std::string& html_out, bool as_json) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<EvaluationStore> store, EvaluationStore::open(db));
  LG_ASSIGN_OR_RETURN(EvaluationRecord record, store->get(id));
  json report = json::parse(record.report, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded()) return Status::corrupt("evaluation run " + std::to_string(id) + ": report is not JSON");
  LG_ASSIGN_OR_RETURN(eval::RunResult run, eval::run_from_json(report));
  run.id = id;
  LG_ASSIGN_OR_RETURN(eval::GateConfig gates, eval::GateConfig::parse(run.gates_text, "stored gates of run " +
                                                                                          std::to_string(id)));
  // The recorded reference it was judged against: that run and arm again.
  std::optional<eval::RunResult> recorded;
  if (run.recorded_run_id > 0) {
    LG_ASSIGN_OR_RETURN(EvaluationRecord earlier, store->get(run.recorded_run_id));
    const json stored = json::parse(earlier.report, nullptr, /*allow_exceptions=*/false);
    if (stored.is_discarded()) return Status::corrupt("evaluation run " + std::to_string(earlier.id) + ": not JSON");
    LG_ASSIGN_OR_RETURN(eval::RunResult r, eval::run_from_json(stored));
    r.id = earlier.id;
    recorded = std::move(r);
  }
  const std::string recorded_arm = run.recorded_arm.empty() ? "online" : run.recorded_arm;
  // Every configured gate comes back, skipped ones included, so the list is the stored one's.
  const std::vector<eval::GateResult> again =
      eval::evaluate_gates(gates, run, {recorded ? &*recorded : nullptr, recorded_arm});
  const eval::Verdict verdict = eval::overall_verdict(again);
  if (again.size() != run.gates.size()) {
    return Status::internal("run " + std::to_string(id) + " stored " + std::to_string(run.gates.size()) +
                            " gates but its items give " + std::to_string(again.size()));
  }
  if (verdict != run.verdict) {
    return Status::internal("run " + std::to_string(id) + " was stored as " + eval::verdict_name(run.verdict) +
                            " but its items give " + eval::verdict_name(verdict));
  }
  LG_RETURN_IF_ERROR(write_reports(run, "", html_out));
  if (as_json) {
    std::cout << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    print_summary(run);
    std::printf("recomputed from the stored items: %s (same as stored)\n", eval::verdict_name(verdict));
  }
  return verdict;
}

Status list_evals(const std::string& db) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<EvaluationStore> store, EvaluationStore::open(db));
  LG_ASSIGN_OR_RETURN(std::vector<EvaluationRecord> runs, store->list(50));
  if (runs.empty()) {
    std::cout << "no evaluation runs in " << db << "\n";
    return Status::ok();
  }
  std::vector<std::vector<std::string>> rows;
  for (const EvaluationRecord& r : runs) {
    rows.push_back({std::to_string(r.id), r.verdict, r.online_base + "-" + r.online_sha256.substr(0, 8),
                    r.candidate_base + "-" + r.candidate_sha256.substr(0, 8), human_time(r.finished_at)});
  }
  print_table({"RUN", "VERDICT", "ONLINE", "CANDIDATE", "FINISHED"}, rows);
  return Status::ok();
}

// Runs `body`; an error prints "loragate: ..." and exits 2, a verdict exits with its code.
void finish(const Result<eval::Verdict>& v) {
  if (!v.is_ok()) {
    fail(v.status().message());
    throw CLI::RuntimeError(kExitError);
  }
  if (*v != eval::Verdict::kPass) throw CLI::RuntimeError(exit_code(*v));
}

}  // namespace

void add_eval_command(CLI::App& app) {
  CLI::App* ev = app.add_subcommand("eval", "Compare a candidate base with the online one: run, list, show evaluations");
  ev->require_subcommand(1);
  {
    auto f = std::make_shared<RunFlags>();
    CLI::App* cmd = ev->add_subcommand(
        "run", "Evaluate a candidate base against the online one: in process, or inside a server with --url");
    cmd->add_option("--url", f->url, "Server mode: the server evaluates its loaded base --candidate (token: "
                                     "$LORAGATE_ADMIN_TOKEN); the suite is read by the server");
    cmd->add_option("--online", f->online, "Online base model directory")->check(CLI::ExistingDirectory);
    cmd->add_option("--candidate", f->candidate, "Candidate base model directory (with --url: the base's name)")
        ->required();
    cmd->add_option("--online-name", f->online_name, "The online base's name in reports")->capture_default_str();
    cmd->add_option("--candidate-name", f->candidate_name, "The candidate's name in reports")->capture_default_str();
    cmd->add_option("--suite", f->suite, "Suite YAML (scenarios, generic set)")->required()->check(CLI::ExistingFile);
    cmd->add_option("--online-adapters", f->online_adapters, "One PEFT folder per scenario, for the online base")
        ->check(CLI::ExistingDirectory);
    cmd->add_option("--candidate-adapters", f->candidate_adapters, "The same, retrained for the candidate")
        ->check(CLI::ExistingDirectory);
    cmd->add_option("--gates", f->gates, "Gates YAML (default: the built-in gates of configs/gates.yaml)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--db", f->db, "Registry file that keeps the history")->capture_default_str();
    cmd->add_option("--json", f->json_out, "Write the JSON report here");
    cmd->add_option("--html", f->html_out, "Write the HTML report here");
    cmd->add_flag("--copied-adapter-arm", f->copied_adapter_arm, "Also run the online adapter on the candidate base");
    cmd->add_option("--online-dtype", f->online_dtype, "Weight storage of the online base (offline mode)")
        ->capture_default_str();
    cmd->add_option("--candidate-dtype", f->candidate_dtype,
                    "Weight storage of the candidate, e.g. int8 to judge a quantised online base (offline mode)")
        ->capture_default_str();
    cmd->add_option("--seed", f->seed, "Seed of the bootstrap and of the arms' order per item")->capture_default_str();
    cmd->add_option("--latency-repeats", f->latency_repeats,
                    "Time each item's generation this many times per arm; TTFT and TPOT are the medians (offline mode)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100));
    cmd->callback([f] { finish(run_eval(*f)); });
  }
  {
    auto db = std::make_shared<std::string>(kOfflineHistoryDb);
    CLI::App* cmd = ev->add_subcommand("ls", "List stored evaluation runs");
    cmd->add_option("--db", *db, "Registry file")->capture_default_str();
    cmd->callback([db] {
      Status s = list_evals(*db);
      if (!s.is_ok()) throw CLI::RuntimeError(fail(s.message()) + 1);
    });
  }
  {
    auto db = std::make_shared<std::string>(kOfflineHistoryDb);
    auto id = std::make_shared<int64_t>(0);
    auto html = std::make_shared<std::string>();
    auto as_json = std::make_shared<bool>(false);
    CLI::App* cmd = ev->add_subcommand("show", "Show a stored run, its verdict recomputed from its items");
    cmd->add_option("RUN", *id, "Run id (see eval ls)")->required();
    cmd->add_option("--db", *db, "Registry file")->capture_default_str();
    cmd->add_option("--html", *html, "Also write its HTML report here");
    cmd->add_flag("--json", *as_json, "Print the stored JSON report");
    cmd->callback([db, id, html, as_json] { finish(show_eval(*db, *id, *html, *as_json)); });
  }
}

}  // namespace loragate::cli

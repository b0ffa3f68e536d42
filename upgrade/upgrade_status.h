// The state of one upgrade as it is shown and stored: each scenario's step,
// the record the UpgradeStore keeps, and their JSON (GET /admin/upgrades and
// the store's steps column). Plain values; safe to copy between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "common/status.h"
#include "registry/upgrade_store.h"

namespace loragate::eval {

// How an upgrade gets its adapters for the candidate.
//  transfer-first: each scenario's online adapter is tried on the candidate as
//    it is; only those that do not pass their scenario's gates are retrained,
//    warm-started from it.
//  retrain-all: every scenario's adapter is retrained from scratch.
// Both judge the candidate base on its own first (the gates that need no adapter).
enum class UpgradeStrategy { kTransferFirst, kRetrainAll };
const char* upgrade_strategy_name(UpgradeStrategy s);
Result<UpgradeStrategy> parse_upgrade_strategy(const std::string& name);

// One stage of an upgrade, in order: base, transfer, retrain, evaluate, promote.
struct UpgradeStage {
  std::string name;
  std::string state = "pending";  // pending | running | done | failed | skipped | cancelled
  double seconds = 0;             // wall time it ran
  std::string note;               // what it decided: a verdict, what it skipped and why
};
LG_JSON_FIELDS(UpgradeStage) {
  f("name", s.name);
  f("state", s.state);
  f("seconds", s.seconds);
  f("note", s.note, json_fields::kOmitEmpty);
}

// One scenario of an upgrade.
struct UpgradeStep {
  std::string scenario;
  std::string adapter;      // its adapter's name (on the serving base, and so on the candidate)
  // pending | transferring | training | registered | skipped (no training set) | failed | cancelled
  std::string state = "pending";
  // How it ended: "transferred" (the online adapter held on the candidate),
  // "retrained", or "failed"; "" while undecided.
  std::string outcome;
  std::string transfer;     // the transfer's verdict on this scenario's gates ("" when not tried)
  std::string online_dir;   // the online adapter's folder (what a transfer carries over)
  std::string data_path, data_sha256;
  std::string out_dir;      // the adapter's folder on the candidate (the online one when transferred)
  bool reused = false;      // found finished in out_dir: not trained again
  int64_t step = 0, total_steps = 0;
  double loss = 0, first_loss = 0;
  double tokens_per_s = 0, eta_s = 0;
  std::string error;
};
// Its fields, once, for both directions of its JSON (common/json_fields.h).
LG_JSON_FIELDS(UpgradeStep) {
  f("scenario", s.scenario);
  f("adapter", s.adapter);
  f("state", s.state);
  f("outcome", s.outcome, json_fields::kOmitEmpty);
  f("transfer", s.transfer, json_fields::kOmitEmpty);
  f("online_dir", s.online_dir, json_fields::kOmitEmpty);
  f("data_path", s.data_path);
  f("data_sha256", s.data_sha256);
  f("out_dir", s.out_dir);
  f("reused", s.reused);
  f("step", s.step);
  f("total_steps", s.total_steps);
  f("loss", s.loss);
  f("first_loss", s.first_loss);
  f("tokens_per_s", s.tokens_per_s);
  f("eta_s", s.eta_s);
  f("error", s.error, json_fields::kOmitEmpty);
}

struct UpgradeStatus {
  UpgradeRecord record;               // id, candidate, state, verdict, evaluation, report, error
  std::string strategy = "transfer-first";
  std::vector<UpgradeStage> stages;
  std::vector<UpgradeStep> steps;
  nlohmann::json similarity;          // base_similarity.h's, once the transfer stage measured it
  int64_t eval_done = 0, eval_total = 0;  // the evaluation's units of work, while it runs (not stored)
};

// What the store keeps beside the record (UpgradeRecord::steps): the
// strategy, stages, steps and similarity as one JSON object; and back.
// Tolerant of what it cannot read: absent keys keep their defaults (the record
// is ours), and a bare list of steps (as stored before stages) is read too.
std::string upgrade_steps_text(const UpgradeStatus& status);
UpgradeStatus upgrade_status_of(const UpgradeRecord& record);

// Where the HTML page of an upgrade's JSON report is written: beside it.
std::string upgrade_report_html_path(const std::string& json_path);

// The upgrade as the admin API shows it: {id, candidate, path, online, state,
// strategy, stages, promote, skip_untrained, steps, similarity, verdict,
// evaluation, report, report_html, error, ...}.
nlohmann::json upgrade_status_json(const UpgradeStatus& status);

}  // namespace loragate::eval

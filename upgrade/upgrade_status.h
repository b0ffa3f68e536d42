// The state of one upgrade as it is shown and stored: each scenario's step,
// the record the UpgradeStore keeps, and their JSON (GET /admin/upgrades and
// the store's steps column). Plain values; safe to copy between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "registry/upgrade_store.h"

namespace loragate::eval {

// One scenario of an upgrade.
struct UpgradeStep {
  std::string scenario;
  std::string adapter;      // its adapter's name (on the serving base, and so on the candidate)
  // pending | training | registered | skipped (no training set) | failed | cancelled
  std::string state = "pending";
  std::string data_path, data_sha256;
  std::string out_dir;      // the retrained adapter's folder
  bool reused = false;      // found finished in out_dir: not trained again
  int64_t step = 0, total_steps = 0;
  double loss = 0, first_loss = 0;
  double tokens_per_s = 0, eta_s = 0;
  std::string error;
};
// Its fields, once, for both directions of its JSON (common/json_fields.h).
template <class Fields, class Step>
void list_fields(Fields& f, Step& s) {
  f("scenario", s.scenario);
  f("adapter", s.adapter);
  f("state", s.state);
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
  std::vector<UpgradeStep> steps;
  int64_t eval_done = 0, eval_total = 0;  // the evaluation's units of work, while it runs (not stored)
};

// The steps as the store keeps them (UpgradeRecord::steps), and back. Tolerant
// of what it cannot read: absent keys keep their defaults (the record is ours).
std::string upgrade_steps_text(const std::vector<UpgradeStep>& steps);
UpgradeStatus upgrade_status_of(const UpgradeRecord& record);

// Where the HTML page of an upgrade's JSON report is written: beside it.
std::string upgrade_report_html_path(const std::string& json_path);

// The upgrade as the admin API shows it: {id, candidate, path, online, state,
// promote, skip_untrained, steps, verdict, evaluation, report, error, ...}.
nlohmann::json upgrade_status_json(const UpgradeStatus& status);

}  // namespace loragate::eval

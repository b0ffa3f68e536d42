// Retraining one scenario's adapter on another base: what an upgrade does for
// every scenario, in a server (upgrade_job.h) or offline (`loragate upgrade
// --online`). A thin layer over train::train_adapter that decides where the
// adapter goes and whether it is already there.
//
// The folder is content-addressed: <root>/<scenario>-<12 hex>, the hex of the
// sha256 of the base's weights, the training file's sha256, the training
// config and, for a warm start, the starting adapter's weights. The same retraining lands in the same folder, so a run cut short
// resumes from its checkpoint there, and a finished one is found again and
// not redone; anything that changes the result lands elsewhere.
//
// Plain functions; safe to call from many threads on different folders.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/weight_type.h"
#include "trainer/trainer.h"

namespace loragate::eval {

// The base an adapter is retrained on.
struct RetrainBase {
  std::string dir;                     // its model directory
  WeightType dtype = WeightType::kF32; // the weight storage it is trained on (as the server loads it)
  std::string sha256;                  // of its weights (ServingBase::sha256, or the offline arm's)
  ComputeGate* gate = nullptr;         // in a server: training takes background turns of it (TrainJob::gate)
};

// What one scenario's adapter is retrained from.
struct RetrainSpec {
  std::string scenario;
  std::string data_path;               // the JSONL training set
  std::string data_sha256;             // what it was when recorded; "" = take it as it is now
  nlohmann::json config = nlohmann::json::object();  // the TrainConfig JSON; absent keys: the defaults
  // Warm start (train::TrainJob::init_from): the adapter the run starts from,
  // e.g. the scenario's online adapter carried over to the candidate. "" = fresh.
  std::string init_from;
};

struct RetrainOutcome {
  std::string dir;          // the adapter's folder
  std::string data_sha256;  // of the training set as trained on
  bool reused = false;      // a finished run was already there: nothing was trained
  int64_t steps = 0;
  double first_loss = 0, last_loss = 0;  // as train_adapter reports them (0 when unknown)
  double seconds = 0;
};

// <root>/<scenario>-<12 hex> for these inputs (no file is touched).
std::string retrained_adapter_dir(const std::string& root, const RetrainBase& base, const std::string& scenario,
                                  const std::string& data_sha256, const nlohmann::json& config,
                                  const std::string& init_sha256 = "");

// True when `dir` holds a finished run: the PEFT files and training.json, and
// no checkpoint left (train_adapter removes it at the end).
bool retrained_adapter_finished(const std::string& dir);

// Retrains `spec` on `base` into retrained_adapter_dir(root, ...): checks the
// training set is still the recorded one (failed_precondition naming the
// scenario otherwise), reuses a finished folder, resumes a checkpoint, else
// trains from the start. `roots`: the training set must lie inside one
// (empty: anywhere). Cancelled (resumable) when `cancel` becomes true.
Result<RetrainOutcome> retrain_adapter(const RetrainBase& base, const RetrainSpec& spec, const std::string& root,
                                       const std::vector<std::string>& roots,
                                       const std::function<void(const train::TrainProgress&)>& on_step = {},
                                       const std::atomic<bool>* cancel = nullptr);

}  // namespace loragate::eval

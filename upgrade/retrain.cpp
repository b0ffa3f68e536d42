#include "upgrade/retrain.h"

#include <filesystem>
#include <fstream>

#include "common/path_roots.h"
#include "common/sha256.h"
#include "trainer/train_config.h"
#include "trainer/train_data.h"

namespace loragate::eval {

namespace fs = std::filesystem;

std::string retrained_adapter_dir(const std::string& root, const RetrainBase& base, const std::string& scenario,
                                  const std::string& data_sha256, const nlohmann::json& config,
                                  const std::string& init_sha256) {
  Sha256 h;
  h.update("loragate-retrain");
  for (const std::string& part : {base.sha256, std::string(weight_type_name(base.dtype)), data_sha256, config.dump()}) {
    h.update(std::string_view("\0", 1));
    h.update(part);
  }
  if (!init_sha256.empty()) {  // absent for a fresh start: those folders keep the names they had
    h.update(std::string_view("\0init\0", 6));
    h.update(init_sha256);
  }
  return (fs::path(root) / (scenario + "-" + h.finish_hex().substr(0, 12))).string();
}

bool retrained_adapter_finished(const std::string& dir) {
  std::error_code ec;
  for (const char* file : {"adapter_config.json", "adapter_model.safetensors", "training.json"}) {
    if (!fs::is_regular_file(fs::path(dir) / file, ec)) return false;
  }
  return !fs::exists(fs::path(dir) / "checkpoint", ec);
}

namespace {

// The first and last loss a finished run recorded in training.json, when it says.
void read_recorded_losses(const std::string& dir, RetrainOutcome* out) {
  std::ifstream in(fs::path(dir) / "training.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  auto number = [&](const char* key, double* v) {
    if (j.contains(key) && j.at(key).is_number()) *v = j.at(key).get<double>();
  };
  number("first_loss", &out->first_loss);
  number("last_loss", &out->last_loss);
  number("seconds", &out->seconds);
  if (j.contains("steps") && j.at("steps").is_number_integer()) out->steps = j.at("steps").get<int64_t>();
}

}  // namespace

Result<RetrainOutcome> retrain_adapter(const RetrainBase& base, const RetrainSpec& spec, const std::string& root,
                                       const std::vector<std::string>& roots,
                                       const std::function<void(const train::TrainProgress&)>& on_step,
                                       const std::atomic<bool>* cancel) {
  const std::string who = "scenario '" + spec.scenario + "'";
  Result<train::TrainConfig> parsed = train::train_config_from_json(spec.config);
  if (!parsed.is_ok()) return parsed.status().with_context(who + ": training config");
  const train::TrainConfig config = std::move(parsed).value();
  // Read as the trainer reads it (a regular file inside the roots, capped): a
  // FIFO or a link to /dev/zero swapped in since `scenario set` is refused here
  // instead of blocking or reading without end.
  std::string data_sha256;
  {  // the bytes go at the end of the block: the trainer reads them again, checking they are these
    Result<std::string> text = read_regular_file(spec.data_path, train::kMaxTrainFileBytes, "training set", roots);
    if (!text.is_ok()) return text.status().with_context(who);
    data_sha256 = sha256_hex(*text);
  }
  if (!spec.data_sha256.empty() && data_sha256 != spec.data_sha256) {
    return Status::failed_precondition(who + ": training set " + spec.data_path + " changed since it was recorded" +
                                       " (sha256 " + data_sha256.substr(0, 12) + ", recorded " +
                                       spec.data_sha256.substr(0, 12) + "); record it again with scenario set --train");
  }
  std::string init_sha256;
  if (!spec.init_from.empty()) {
    Result<std::string> init = sha256_file((fs::path(spec.init_from) / "adapter_model.safetensors").string());
    if (!init.is_ok()) return init.status().with_context(who + ": the adapter to start from");
    init_sha256 = std::move(init).value();
  }
  RetrainOutcome out;
  out.data_sha256 = data_sha256;
  out.dir = retrained_adapter_dir(root, base, spec.scenario, data_sha256, train::to_json(config), init_sha256);
  if (retrained_adapter_finished(out.dir)) {
    out.reused = true;
    read_recorded_losses(out.dir, &out);
    return out;
  }
  std::error_code ec;
  fs::create_directories(out.dir, ec);
  if (ec) return Status::io_error(who + ": cannot create " + out.dir + ": " + ec.message());
  train::TrainJob job;
  job.base_dir = base.dir;
  job.dtype = base.dtype;
  job.data_path = spec.data_path;
  job.out_dir = out.dir;
  job.config = config;
  job.resume = fs::exists(fs::path(out.dir) / "checkpoint", ec);
  job.roots = roots;
  job.gate = base.gate;
  job.init_from = spec.init_from;
  job.expect_data_sha256 = data_sha256;
  Result<train::TrainReport> report = train::train_adapter(job, on_step, cancel);
  if (!report.is_ok()) return report.status().with_context(who);
  out.steps = report->steps;
  out.first_loss = report->first_loss;
  out.last_loss = report->last_loss;
  out.seconds = report->seconds;
  return out;
}

}  // namespace loragate::eval

// One LoRA fine-tuning run; see trainer.h.
#include "trainer/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "chat/chat_template.h"
#include "common/atomic_file.h"
#include "engine/compute_gate.h"
#include "engine/llama_model.h"
#include "model/model_dir.h"
#include "tokenizer/tokenizer.h"
#include "trainer/adamw.h"
#include "trainer/lora_params.h"
#include "trainer/train_data.h"
#include "trainer/train_model.h"
#include "trainer/warm_start.h"

namespace loragate::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

nlohmann::json curve_json(const std::vector<LossPoint>& curve) {
  nlohmann::json out = nlohmann::json::array();
  for (const LossPoint& p : curve)
    out.push_back({{"step", p.step}, {"loss", p.loss}, {"grad_norm", p.grad_norm}, {"lr", p.lr}, {"tokens", p.tokens}});
  return out;
}

// training.json: what made this adapter, written atomically beside it.
Status write_record(const TrainJob& job, const TrainConfig& config, const WarmStart* warm, const TrainReport& report) {
  nlohmann::json record = {
      {"config", to_json(config)},
      {"data", {{"path", fs::absolute(job.data_path).string()}, {"sha256", report.data_sha256}}},
      {"base", {{"path", fs::absolute(job.base_dir).string()}, {"sha256", report.base_sha256},
                {"dtype", std::string(weight_type_name(job.dtype))}}},
      {"steps", report.steps},
      {"tokens", report.tokens},
      {"seconds", report.seconds},
      {"first_loss", report.first_loss},
      {"last_loss", report.last_loss},
      {"loss_curve", curve_json(report.curve)},
  };
  if (warm != nullptr) record["init_from"] = {{"path", fs::absolute(warm->path).string()}, {"sha256", warm->sha256}};
  return write_file_atomic(job.out_dir + "/training.json", record.dump(2) + "\n");
}

double mean_of_last(const std::vector<LossPoint>& curve, size_t n) {
  if (curve.empty()) return 0;
  const size_t k = std::min(n, curve.size());
  double sum = 0;
  for (size_t i = curve.size() - k; i < curve.size(); ++i) sum += curve[i].loss;
  return sum / static_cast<double>(k);
}

}  // namespace

Result<TrainReport> train_adapter(const TrainJob& job, const std::function<void(const TrainProgress&)>& on_step,
                                  const std::atomic<bool>* cancel) {
  TrainConfig config = job.config;
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const ModelDir> dir, ModelDir::open(job.base_dir));
  std::optional<WarmStart> warm;
  if (!job.init_from.empty()) {
    LG_ASSIGN_OR_RETURN(warm, load_warm_start(job.init_from, dir->config()));
    config.lora = warm->recipe;
  }
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::load(job.base_dir));
  // A base without a chat template can still train on {prompt, completion} lines.
  Result<ChatTemplate> chat = ChatTemplate::load(job.base_dir);
  const ChatTemplate chat_template = chat.is_ok() ? std::move(*chat) : ChatTemplate::plain();
  LG_ASSIGN_OR_RETURN(TrainData data,
                      load_train_data(job.data_path, *tokenizer, chat_template, config.max_seq_len, job.roots));
  if (!job.expect_data_sha256.empty() && data.sha256 != job.expect_data_sha256) {
    return Status::failed_precondition(job.data_path + " changed while the run started (sha256 " +
                                       data.sha256.substr(0, 12) + ", expected " +
                                       job.expect_data_sha256.substr(0, 12) + "); nothing was trained");
  }
  LG_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model, LlamaModel::load(*dir, job.dtype));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<TrainModel> train_model, TrainModel::create(*model));
  LG_ASSIGN_OR_RETURN(LoraParams params, LoraParams::init(dir->config(), config.lora, config.seed));
  if (warm) LG_RETURN_IF_ERROR(apply_warm_start(*warm->adapter, params));

  const int64_t total = config.total_steps(static_cast<int64_t>(data.examples.size()));
  AdamW optimizer(config.optimizer, total);
  BatchSampler sampler(static_cast<int64_t>(data.examples.size()), config.batch, config.seed, config.sampling);
  nlohmann::json identity_config = to_json(config);
  if (warm) identity_config["init_from_sha256"] = warm->sha256;  // a checkpoint of another start is not this run's
  const RunIdentity identity{identity_config, data.sha256, dir->sha256()};

  std::error_code ec;
  fs::create_directories(job.out_dir, ec);
  if (ec) return Status::io_error(job.out_dir + ": cannot create: " + ec.message());
  CheckpointState state;
  if (job.resume) {
    Result<CheckpointState> loaded = load_checkpoint(job.out_dir, params, optimizer, identity);
    if (loaded.is_ok()) {
      state = std::move(*loaded);
      sampler.seek(state.sampler_position);
    } else if (loaded.status().code() != StatusCode::kNotFound) {
      return loaded.status();
    }
  } else if (fs::exists(job.out_dir + "/checkpoint")) {
    return Status::failed_precondition(job.out_dir + " holds the checkpoint of an interrupted run: resume it "
                                       "(--resume) or remove the directory");
  }

  TrainReport report;
  report.out_dir = job.out_dir;
  report.data_sha256 = data.sha256;
  report.base_sha256 = dir->sha256();
  const Clock::time_point start = Clock::now();
  const int64_t first_step = state.step;
  std::vector<const TrainExample*> micro;
  while (state.step < total) {
    // Draw the step's micro-batches first: the mean is over all their targets.
    std::vector<std::vector<int64_t>> draws;
    int64_t targets = 0;
    for (int64_t k = 0; k < config.grad_accum; ++k) {
      draws.push_back(sampler.next());
      for (int64_t i : draws.back()) targets += data.examples[static_cast<size_t>(i)].num_targets();
    }
    params.zero_grad();
    LossSum step_loss;
    for (const std::vector<int64_t>& draw : draws) {
      micro.clear();
      for (int64_t i : draw) {
        micro.push_back(&data.examples[static_cast<size_t>(i)]);
        report.tokens += static_cast<int64_t>(micro.back()->ids.size());
      }
      const float scale = 1.0f / static_cast<float>(targets);
      if (job.gate == nullptr) {
        const LossSum l = train_model->forward_backward(micro, params, scale);
        step_loss.nll += l.nll;
        step_loss.tokens += l.tokens;
        continue;
      }
      for (const TrainExample* example : micro) {
        const ComputeGate::Turn turn(*job.gate, GateClass::kBackground);
        const LossSum l = train_model->forward_backward(std::span(&example, 1), params, scale);
        step_loss.nll += l.nll;
        step_loss.tokens += l.tokens;
      }
    }
    const double lr = optimizer.lr_at(state.step);
    const double grad_norm = optimizer.step(params);
    if (!std::isfinite(grad_norm)) {
      // AdamW left the parameters as they were: the last checkpoint is still good.
      return Status::failed_precondition("training diverged at step " + std::to_string(state.step + 1) +
                                         " (gradient norm " + std::to_string(grad_norm) +
                                         "); lower the learning rate or clip with max_grad_norm");
    }
    ++state.step;
    state.sampler_position = sampler.position();
    state.curve.push_back({state.step, step_loss.mean(), grad_norm, lr, step_loss.tokens});

    if (on_step) {
      TrainProgress p;
      p.step = state.step;
      p.total_steps = total;
      p.loss = step_loss.mean();
      p.lr = lr;
      p.grad_norm = grad_norm;
      p.elapsed_s = seconds_since(start);
      p.tokens_per_s = p.elapsed_s > 0 ? static_cast<double>(report.tokens) / p.elapsed_s : 0;
      const int64_t done = state.step - first_step;
      p.eta_s = done > 0 ? p.elapsed_s / static_cast<double>(done) * static_cast<double>(total - state.step) : 0;
      on_step(p);
    }
    const bool cancelled = cancel != nullptr && cancel->load();
    const bool due = config.checkpoint_every > 0 && state.step % config.checkpoint_every == 0 && state.step < total;
    if (cancelled || due) LG_RETURN_IF_ERROR(save_checkpoint(job.out_dir, params, optimizer, state, identity));
    if (cancelled && state.step < total) {
      return Status::cancelled("training cancelled at step " + std::to_string(state.step) + " of " +
                               std::to_string(total) + "; resume it with --resume");
    }
  }

  report.steps = state.step;
  report.seconds = seconds_since(start);
  report.curve = std::move(state.curve);
  report.first_loss = report.curve.empty() ? 0 : report.curve.front().loss;
  report.last_loss = mean_of_last(report.curve, 10);
  LG_RETURN_IF_ERROR(params.save_peft(job.out_dir, fs::absolute(job.base_dir).string()));
  LG_RETURN_IF_ERROR(write_record(job, config, warm ? &*warm : nullptr, report));
  LG_RETURN_IF_ERROR(remove_checkpoint(job.out_dir));
  return report;
}

}  // namespace loragate::train

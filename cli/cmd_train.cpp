// `loragate train`: fine-tunes a LoRA adapter on a frozen base, on the CPU,
// and writes it as a PEFT folder the server loads as-is.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "common/weight_type.h"
#include "kernels/cpu/thread_pool.h"
#include "trainer/trainer.h"

namespace loragate::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

std::string clock_text(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  return buf;
}

// One line redrawn in place: step, bar, loss, throughput, ETA.
void draw_bar(const train::TrainProgress& p) {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * p.step / std::max<int64_t>(1, p.total_steps));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\rstep %lld/%lld [%s] loss %.4f  %.0f tok/s  ETA %s   ", static_cast<long long>(p.step),
               static_cast<long long>(p.total_steps), bar.c_str(), p.loss, p.tokens_per_s, clock_text(p.eta_s).c_str());
  if (p.step == p.total_steps) std::fprintf(stderr, "\n");
}

void print_json_line(const train::TrainProgress& p) {
  const nlohmann::json j = {{"step", p.step},         {"total_steps", p.total_steps}, {"loss", p.loss},
                            {"lr", p.lr},             {"grad_norm", p.grad_norm},     {"tokens_per_s", p.tokens_per_s},
                            {"elapsed_s", p.elapsed_s}, {"eta_s", p.eta_s}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

Result<std::vector<LoraModule>> parse_targets(const std::string& list) {
  std::vector<LoraModule> out;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    std::optional<LoraModule> m = train::parse_lora_target(name);
    if (!m) return Status::invalid_argument("--targets: unknown module '" + name + "'; valid: q,k,v,o,gate,up,down");
    out.push_back(*m);
  }
  if (out.empty()) return Status::invalid_argument("--targets must name at least one module");
  return out;
}

// --out must be new or empty: a finished adapter is never replaced by
// accident (as `quantize --out` refuses a non-empty folder). --resume writes
// into its own checkpoint's folder; --overwrite says replacing is meant.
Status check_out_dir(const std::string& out, bool resume, bool overwrite) {
  std::error_code ec;
  if (resume || overwrite || !std::filesystem::exists(out, ec)) return Status::ok();
  if (!std::filesystem::is_directory(out, ec)) return Status::invalid_argument("--out " + out + " is not a directory");
  if (std::filesystem::is_empty(out, ec)) return Status::ok();
  const bool checkpoint = std::filesystem::exists(std::filesystem::path(out) / "checkpoint", ec);
  return Status::already_exists("--out " + out + " is not empty" +
                                (checkpoint ? " (it holds an unfinished training: --resume continues it, "
                                              "--overwrite starts again)"
                                            : " (it holds files, perhaps a finished adapter: pick another folder, "
                                              "or --overwrite to replace it)"));
}

}  // namespace

void add_train_command(CLI::App& app) {
  struct Flags {
    train::TrainJob job;
    std::string config_file, dtype = "f32", targets, schedule, sampling;
    std::vector<int64_t> layers;
    int threads = 0;
    bool json = false, overwrite = false;
  };
  auto f = std::make_shared<Flags>();
  train::TrainConfig& c = f->job.config;
  CLI::App* cmd = app.add_subcommand("train", "Fine-tune a LoRA adapter on a frozen base (CPU) and write a PEFT folder");
  cmd->add_option("--base", f->job.base_dir, "Base model directory (Hugging Face layout)")->required();
  cmd->add_option("--data", f->job.data_path, "JSONL: {prompt, completion} or {messages} per line")->required();
  cmd->add_option("--out", f->job.out_dir, "Adapter directory to write")->required();
  cmd->add_option("--config", f->config_file, "A JSON train config (the keys of training.json's config); flags override it");
  cmd->add_option("--rank", c.lora.rank, "LoRA rank r")->check(CLI::Range(1, 4096));
  cmd->add_option("--alpha", c.lora.alpha, "lora_alpha (scaling alpha / r)");
  cmd->add_flag("--use-rslora", c.lora.use_rslora, "Scale by alpha / sqrt(r)");
  cmd->add_option("--targets", f->targets, "Modules to adapt: q,k,v,o,gate,up,down (default all)");
  cmd->add_option("--layers", f->layers, "layers_to_transform (default every layer)")->delimiter(',');
  auto* steps = cmd->add_option("--steps", c.steps, "Optimizer steps")->check(CLI::PositiveNumber);
  cmd->add_option("--epochs", c.epochs, "Passes over the data instead of --steps")->excludes(steps)->check(CLI::PositiveNumber);
  cmd->add_option("--batch", c.batch, "Examples per micro-batch")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--grad-accum", c.grad_accum, "Micro-batches per optimizer step")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--lr", c.optimizer.lr, "Peak learning rate");
  cmd->add_option("--weight-decay", c.optimizer.weight_decay, "AdamW decoupled weight decay");
  cmd->add_option("--warmup-steps", c.optimizer.warmup_steps, "Linear warm-up steps");
  cmd->add_option("--schedule", f->schedule, "constant or cosine");
  cmd->add_option("--max-grad-norm", c.optimizer.max_grad_norm, "Clip the global gradient norm (0: off)");
  cmd->add_option("--sampling", f->sampling, "replacement (each step draws --batch examples) or shuffle (epochs)");
  cmd->add_option("--seed", c.seed, "Seed of the LoRA init and the data order");
  cmd->add_option("--max-seq-len", c.max_seq_len, "Longest example in tokens (longer ones are refused)");
  cmd->add_option("--checkpoint-every", c.checkpoint_every, "Steps between resumable checkpoints (0: none)");
  cmd->add_option("--dtype", f->dtype, "Base weight storage: f32, bf16, int8, int4, ...");
  cmd->add_option("--threads", f->threads, "Compute threads (0 = all cores)");
  cmd->add_flag("--resume", f->job.resume, "Continue from OUT's checkpoint");
  cmd->add_option("--init-from", f->job.init_from,
                  "Start from this PEFT adapter (e.g. one trained on the previous base) instead of a fresh one; "
                  "its rank, alpha, targets and layers are used")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--overwrite", f->overwrite, "Write into OUT even when it holds files (a finished adapter is replaced)");
  cmd->add_flag("--json", f->json, "Print one JSON line per step (the default when stderr is not a terminal)");
  cmd->callback([f, cmd] {
    if (Status s = check_out_dir(f->job.out_dir, f->job.resume, f->overwrite); !s.is_ok()) {
      throw CLI::RuntimeError(fail(s.message()));
    }
    train::TrainJob job = f->job;
    if (!job.init_from.empty()) {
      for (const char* shape : {"--rank", "--alpha", "--use-rslora", "--targets", "--layers"}) {
        if (cmd->count(shape) > 0) {
          throw CLI::RuntimeError(fail(std::string(shape) + " does not go with --init-from: the run keeps the "
                                       "LoRA shape of the adapter it starts from"));
        }
      }
    }
    if (!f->config_file.empty()) {
      // The file is the base; flags given on the command line override it.
      std::ifstream in(f->config_file);
      nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!in || j.is_discarded()) throw CLI::RuntimeError(fail("--config: " + f->config_file + " is not readable JSON"));
      if (j.contains("config")) j = j["config"];  // a whole training.json
      Result<train::TrainConfig> from_file = train::train_config_from_json(j);
      if (!from_file.is_ok()) throw CLI::RuntimeError(fail("--config: " + from_file.status().message()));
      train::TrainConfig merged = *from_file;
      const train::TrainConfig& flags = f->job.config;
      auto given = [&](const char* name) { return cmd->count(name) > 0; };
      if (given("--rank")) merged.lora.rank = flags.lora.rank;
      if (given("--alpha")) merged.lora.alpha = flags.lora.alpha;
      if (given("--use-rslora")) merged.lora.use_rslora = flags.lora.use_rslora;
      if (given("--steps")) merged.steps = flags.steps, merged.epochs = 0;
      if (given("--epochs")) merged.epochs = flags.epochs;
      if (given("--batch")) merged.batch = flags.batch;
      if (given("--grad-accum")) merged.grad_accum = flags.grad_accum;
      if (given("--lr")) merged.optimizer.lr = flags.optimizer.lr;
      if (given("--weight-decay")) merged.optimizer.weight_decay = flags.optimizer.weight_decay;
      if (given("--warmup-steps")) merged.optimizer.warmup_steps = flags.optimizer.warmup_steps;
      if (given("--max-grad-norm")) merged.optimizer.max_grad_norm = flags.optimizer.max_grad_norm;
      if (given("--seed")) merged.seed = flags.seed;
      if (given("--max-seq-len")) merged.max_seq_len = flags.max_seq_len;
      if (given("--checkpoint-every")) merged.checkpoint_every = flags.checkpoint_every;
      job.config = merged;
    }
    if (!f->targets.empty()) {
      Result<std::vector<LoraModule>> t = parse_targets(f->targets);
      if (!t.is_ok()) throw CLI::RuntimeError(fail(t.status().message()));
      job.config.lora.targets = *t;
    }
    if (!f->layers.empty()) job.config.lora.layers = f->layers;
    if (!f->schedule.empty()) {
      if (f->schedule != "constant" && f->schedule != "cosine")
        throw CLI::RuntimeError(fail("--schedule must be constant or cosine"));
      job.config.optimizer.schedule = f->schedule == "cosine" ? train::Schedule::kCosine : train::Schedule::kConstant;
    }
    if (!f->sampling.empty()) {
      if (f->sampling != "replacement" && f->sampling != "shuffle")
        throw CLI::RuntimeError(fail("--sampling must be replacement or shuffle"));
      job.config.sampling = f->sampling == "shuffle" ? train::Sampling::kShuffle : train::Sampling::kReplacement;
    }
    // The config is checked as the registry and training.json will hold it.
    Result<train::TrainConfig> checked = train::train_config_from_json(train::to_json(job.config));
    if (!checked.is_ok()) throw CLI::RuntimeError(fail(checked.status().message()));
    Result<WeightType> dtype = parse_weight_type(f->dtype);
    if (!dtype.is_ok()) throw CLI::RuntimeError(fail("--dtype: " + dtype.status().message()));
    job.dtype = *dtype;
    if (f->threads > 0) cpu::compute_pool().resize(f->threads);

    const bool json = f->json || !::isatty(STDERR_FILENO);
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    Result<train::TrainReport> report =
        train::train_adapter(job, json ? print_json_line : draw_bar, &g_interrupted);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (!report.is_ok()) {
      if (!json) std::fprintf(stderr, "\n");
      throw CLI::RuntimeError(fail(report.status().to_string()));
    }
    const train::TrainReport& r = *report;
    std::fprintf(json ? stderr : stdout,
                 "wrote %s (adapter_config.json, adapter_model.safetensors, training.json): %lld steps, loss %.4f -> "
                 "%.4f, %.1f s, %.0f tok/s\n",
                 r.out_dir.c_str(), static_cast<long long>(r.steps), r.first_loss, r.last_loss, r.seconds,
                 r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0.0);
  });
}

}  // namespace loragate::cli

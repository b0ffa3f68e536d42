// The training benchmark; see train_bench.h for what is measured and the
// FLOP count the compute-roof fraction uses.
#include "bench/train_bench.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/roofline.h"
#include "chat/chat_template.h"
#include "engine/llama_model.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"
#include "model/model_dir.h"
#include "tokenizer/tokenizer.h"
#include "trainer/adamw.h"
#include "trainer/lora_params.h"
#include "trainer/train_data.h"
#include "trainer/train_model.h"
#include "trainer/trainer.h"

namespace loragate::bench {
namespace {

namespace fs = std::filesystem;
using train::TrainExample;

// Synthetic examples: `count` sequences of `len` ordinary tokens, every
// token after the first a loss target.
std::vector<TrainExample> synthetic_examples(int count, int len, int64_t vocab) {
  std::vector<TrainExample> out(static_cast<size_t>(count));
  for (int e = 0; e < count; ++e) {
    out[static_cast<size_t>(e)].ids = synthetic_prompt(len, vocab, e + 1);
    out[static_cast<size_t>(e)].target.assign(static_cast<size_t>(len), 1);
    out[static_cast<size_t>(e)].target[0] = 0;
  }
  return out;
}

Result<std::vector<TrainExample>> file_examples(const std::string& model_dir, const std::string& path) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, Tokenizer::load(model_dir));
  Result<ChatTemplate> chat = ChatTemplate::load(model_dir);
  const ChatTemplate chat_template = chat.is_ok() ? std::move(*chat) : ChatTemplate::plain();
  LG_ASSIGN_OR_RETURN(train::TrainData data,
                      train::load_train_data(path, *tokenizer, chat_template, train::TrainConfig{}.max_seq_len));
  return std::move(data.examples);
}

Status dump_examples(const std::string& path, const std::vector<TrainExample>& examples) {
  std::ofstream out(path, std::ios::trunc);
  for (const TrainExample& e : examples) {
    out << nlohmann::json{{"ids", e.ids}, {"target", e.target}}.dump() << "\n";
  }
  if (!out.flush()) return Status::io_error(path + ": cannot write");
  return Status::ok();
}

// The FLOP model of train_bench.h, split by part.
struct StepFlops {
  double base = 0, attention = 0, lora = 0, lm_head = 0;
  double total() const { return base + attention + lora + lm_head; }
  void operator+=(const StepFlops& o) {
    base += o.base;
    attention += o.attention;
    lora += o.lora;
    lm_head += o.lm_head;
  }
};

StepFlops sequence_flops(const ModelConfig& c, const train::LoraParams& params, const TrainExample& e) {
  const double n = static_cast<double>(e.ids.size());
  const double targets = static_cast<double>(e.num_targets());
  const double h = static_cast<double>(c.hidden_size);
  const double q_out = static_cast<double>(c.num_attention_heads * c.head_dim);
  const double kv_out = static_cast<double>(c.num_key_value_heads * c.head_dim);
  const double inter = static_cast<double>(c.intermediate_size);
  const double layers = static_cast<double>(c.num_hidden_layers);
  const double p_layer = h * q_out + 2 * h * kv_out + q_out * h + 3 * h * inter;
  StepFlops f;
  f.base = 4 * p_layer * layers * n;
  f.attention = 6 * q_out * n * (n + 1) * layers;
  for (const train::LoraParam& p : params.params()) {
    f.lora += 6 * static_cast<double>(p.rank * (p.in + p.out)) * n;
  }
  f.lm_head = 4 * static_cast<double>(c.vocab_size) * h * targets;
  return f;
}

// Examples of 0-based step `step`: a fixed walk, so other implementations can replay it.
std::vector<const TrainExample*> step_batch(const std::vector<TrainExample>& examples, int batch, int64_t step) {
  std::vector<const TrainExample*> out;
  for (int j = 0; j < batch; ++j) {
    out.push_back(&examples[static_cast<size_t>((step * batch + j) % static_cast<int64_t>(examples.size()))]);
  }
  return out;
}

int64_t batch_tokens(std::span<const TrainExample* const> batch) {
  int64_t n = 0;
  for (const TrainExample* e : batch) n += static_cast<int64_t>(e->ids.size());
  return n;
}

int64_t batch_targets(std::span<const TrainExample* const> batch) {
  int64_t n = 0;
  for (const TrainExample* e : batch) n += e->num_targets();
  return n;
}

void print_row(const char* name, const std::vector<double>& v, const char* unit) {
  std::printf("%-22s %12.2f %12.2f %12.2f   %s\n", name, median(v), *std::min_element(v.begin(), v.end()),
              *std::max_element(v.begin(), v.end()), unit);
}

}  // namespace

Status run_train_bench(const TrainBenchOptions& o) {
  if (o.threads > 0) cpu::compute_pool().resize(o.threads);
  const int threads = cpu::compute_pool().size();
  LG_ASSIGN_OR_RETURN(WeightType storage, parse_weight_type(o.dtype));
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const ModelDir> dir, ModelDir::open(o.model_dir));
  const ModelConfig& c = dir->config();
  std::vector<TrainExample> examples;
  if (o.data_path.empty()) {
    examples = synthetic_examples(2 * o.batch, o.seq_len, c.vocab_size);
  } else {
    LG_ASSIGN_OR_RETURN(examples, file_examples(o.model_dir, o.data_path));
  }
  if (!o.dump_examples.empty()) LG_RETURN_IF_ERROR(dump_examples(o.dump_examples, examples));

  LG_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model, LlamaModel::load(*dir, storage));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<train::TrainModel> train_model, train::TrainModel::create(*model));
  train::TrainConfig config;
  config.lora.rank = o.rank;
  config.lora.alpha = 2.0 * o.rank;
  LG_ASSIGN_OR_RETURN(train::LoraParams params, train::LoraParams::init(c, config.lora, config.seed));
  const int64_t total_steps = 1 + static_cast<int64_t>(o.steps) * o.repeats;
  train::AdamW optimizer(config.optimizer, total_steps);

  std::printf("loragate train benchmark: model %s, dtype %s, batch %d, %s, LoRA r %d alpha %d on q,k,v,o,gate,up,down "
              "(%lld trainable), %d timed steps x %d repeats after 1 warm-up step, %d threads, matmul %s\n",
              o.model_dir.c_str(), o.dtype.c_str(), o.batch,
              o.data_path.empty() ? ("synthetic examples of " + std::to_string(o.seq_len) + " tokens").c_str()
                                  : (o.data_path + " (" + std::to_string(examples.size()) + " examples)").c_str(),
              o.rank, 2 * o.rank, static_cast<long long>(params.num_parameters()), o.steps, o.repeats, threads,
              cpu::isa_name(cpu::best_isa()));

  int64_t step = 0;
  double first_loss = 0, last_loss = 0;
  auto run_step = [&]() {
    const std::vector<const TrainExample*> batch = step_batch(examples, o.batch, step++);
    params.zero_grad();
    const train::LossSum loss =
        train_model->forward_backward(batch, params, 1.0f / static_cast<float>(batch_targets(batch)));
    optimizer.step(params);
    return loss.mean();
  };
  first_loss = run_step();  // warm-up: buffers grow, pages fault in

  std::vector<double> fma, tps, sps, gflops, roof;
  StepFlops all_flops;
  int64_t all_tokens = 0;
  for (int rep = 0; rep < o.repeats; ++rep) {
    fma.push_back(measure_peak_fma_gflops(threads, 3));
    StepFlops flops;
    int64_t tokens = 0;
    for (int s = 0; s < o.steps; ++s) {
      for (const TrainExample* e : step_batch(examples, o.batch, step + s)) flops += sequence_flops(c, params, *e);
      tokens += batch_tokens(step_batch(examples, o.batch, step + s));
    }
    const BenchClock::time_point start = BenchClock::now();
    for (int s = 0; s < o.steps; ++s) last_loss = run_step();
    const double seconds = seconds_since(start);
    tps.push_back(static_cast<double>(tokens) / seconds);
    sps.push_back(o.steps / seconds);
    gflops.push_back(flops.total() / seconds / 1e9);
    roof.push_back(100.0 * gflops.back() / fma.back());
    all_flops += flops;
    all_tokens += tokens;
  }

  const double per_token = all_flops.total() / static_cast<double>(all_tokens);
  auto share = [&](double part) { return 100.0 * part / all_flops.total(); };
  std::printf("\nFLOPs (useful work, recomputation not counted): base linears 4·P_layers per token (forward 2·P, "
              "backward 2·P: activation gradients only), attention 6·q_out·n(n+1)·L per sequence, LoRA "
              "6·r·(in+out) per token and module, lm_head 4·V·h per loss target\n");
  std::printf("  = %.1f MFLOP per token: base linears %.1f%%, attention %.1f%%, LoRA %.1f%%, lm_head %.1f%%\n",
              per_token / 1e6, share(all_flops.base), share(all_flops.attention), share(all_flops.lora),
              share(all_flops.lm_head));
  std::printf("  tokens per step %.0f, loss targets per step %.0f\n",
              static_cast<double>(all_tokens) / (o.steps * o.repeats),
              static_cast<double>(batch_targets(step_batch(examples, o.batch, 0))));
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("machine (median of %d, measured between the runs): peak f32 FMA %.1f GFLOP/s (min %.1f, max %.1f); "
              "peak RSS %.1f MiB\n\n",
              o.repeats, median(fma), *std::min_element(fma.begin(), fma.end()),
              *std::max_element(fma.begin(), fma.end()), ru.ru_maxrss / 1024.0);
  std::printf("%-22s %12s %12s %12s\n", "figure", "median", "min", "max");
  print_row("tokens/s", tps, "tokens through forward + backward + AdamW");
  print_row("steps/s", sps, "optimizer steps");
  print_row("GFLOP/s", gflops, "by the FLOP count above");
  print_row("of compute roof %", roof, "GFLOP/s / the FMA peak measured beside it");
  std::printf("loss: %.4f at the warm-up step, %.4f at the last\n", first_loss, last_loss);
  return Status::ok();
}

Status run_train_fixture_bench(const TrainFixtureBenchOptions& o) {
  if (o.threads > 0) cpu::compute_pool().resize(o.threads);
  const int threads = cpu::compute_pool().size();
  LG_ASSIGN_OR_RETURN(WeightType storage, parse_weight_type(o.dtype));
  const std::string base_dir =
      o.base == "online" ? o.eval_dir + "/../models/stories260K" : o.eval_dir + "/bases/" + o.base;
  if (!fs::is_directory(base_dir)) return Status::not_found(base_dir + ": no such base directory");
  const std::string scratch =
      (fs::temp_directory_path() / ("loragate-bench-train-" + std::to_string(::getpid()))).string();
  std::printf("loragate fixture training benchmark: base %s (%s), recipe r 8, alpha 16, q,k,v,o,gate,up,down, Adam "
              "lr 2e-3, 200 steps of batch 16, seed 7000 + scenario; %d repeats, %d threads, matmul %s\n",
              o.base.c_str(), o.dtype.c_str(), o.repeats, threads, cpu::isa_name(cpu::best_isa()));
  std::printf("(end to end through train_adapter: load, tokenise, train, checkpoints, PEFT output; the PyTorch loop "
              "that made the fixtures took 106-240 s per adapter)\n\n");
  std::printf("%-8s %12s %12s %12s %12s %18s\n", "adapter", "seconds", "train s", "tokens/s", "steps/s",
              "loss first -> last");
  const char* scenarios[] = {"mia", "cat", "sunny"};
  double total = 0;
  for (int i = 0; i < 3; ++i) {
    std::vector<double> wall, train_s, tps;
    train::TrainReport last;
    for (int rep = 0; rep < o.repeats; ++rep) {
      train::TrainJob job;
      job.base_dir = base_dir;
      job.dtype = storage;
      job.data_path = o.eval_dir + "/scenarios/" + scenarios[i] + "/train.jsonl";
      job.out_dir = scratch + "/" + scenarios[i];
      job.config.seed = 7000 + static_cast<uint64_t>(i);  // the fixtures' defaults otherwise
      std::error_code ec;
      fs::remove_all(job.out_dir, ec);
      const BenchClock::time_point start = BenchClock::now();
      Result<train::TrainReport> report = train::train_adapter(job);
      wall.push_back(seconds_since(start));
      if (!report.is_ok()) {
        fs::remove_all(scratch, ec);
        return report.status();
      }
      last = std::move(*report);
      train_s.push_back(last.seconds);
      tps.push_back(static_cast<double>(last.tokens) / last.seconds);
    }
    total += median(wall);
    std::printf("%-8s %12.2f %12.2f %12.0f %12.2f %9.4f -> %.4f\n", scenarios[i], median(wall), median(train_s),
                median(tps), static_cast<double>(last.steps) / median(train_s), last.first_loss, last.last_loss);
  }
  std::printf("%-8s %12.2f   (medians of %d; \"seconds\" is the whole train_adapter call, \"train s\" its "
              "step loop)\n",
              "all 3", total, o.repeats);
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return Status::ok();
}

}  // namespace loragate::bench

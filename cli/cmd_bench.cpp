// `loragate bench`: benchmarks that print figures (see BENCHMARKS.md).
#include <cstdio>
#include <memory>
#include <string>

#include "bench/decode_bench.h"
#include "bench/grammar_bench.h"
#include "bench/load_bench.h"
#include "bench/lora_bench.h"
#include "bench/matmul_bench.h"
#include "bench/quant_bench.h"
#include "bench/roofline.h"
#include "bench/serve_gap_bench.h"
#include "bench/train_bench.h"
#include "cli/commands.h"
#include "common/weight_type.h"

namespace loragate::cli {
namespace {

// Accepts the weight storage names of common/weight_type.h.
CLI::Validator weight_type_check() {
  return CLI::Validator(
      [](std::string& v) {
        Result<WeightType> t = parse_weight_type(v);
        return t.is_ok() ? std::string() : t.status().message();
      },
      "WEIGHT_TYPE");
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks that print figures");
  bench->require_subcommand(1);
  add_bench_serve_command(*bench);

  // For scripts that drive servers (bench/*.sh): the machine's figures in the same run as theirs.
  auto probe_reps = std::make_shared<int>(3);
  CLI::App* machine = bench->add_subcommand(
      "machine", "This machine now: STREAM-triad bandwidth and peak f32 FMA rate with the engine's threads");
  machine->add_option("--reps", *probe_reps, "Repetitions of each probe (medians reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  machine->callback([probe_reps] {
    const int threads = bench::engine_threads();
    const double triad = bench::measure_triad_gbps(threads, *probe_reps);
    const double fma = bench::measure_peak_fma_gflops(threads, *probe_reps);
    std::printf("machine: triad %.1f GB/s, peak f32 FMA %.1f GFLOP/s (%d threads, median of %d)\n", triad, fma,
                threads, *probe_reps);
  });

  auto o = std::make_shared<bench::DecodeBenchOptions>();
  CLI::App* decode = bench->add_subcommand("decode", "Prefill and batched decode tokens/s against the roofline");
  decode->add_option("--model", o->model_dir, "Model directory (e.g. from synth-model --preset 110m)")
      ->required()
      ->check(CLI::ExistingDirectory);
  decode->add_option("--dtypes", o->dtypes, "Weight storages to compare, interleaved")
      ->delimiter(',')
      ->check(weight_type_check());
  decode->add_option("--batches", o->batches, "Decode batch sizes")->delimiter(',');
  decode->add_option("--prompt-len", o->prompt_len, "Prompt tokens")->check(CLI::PositiveNumber);
  decode->add_option("--steps", o->decode_steps, "Timed decode steps")->check(CLI::PositiveNumber);
  decode->add_option("--reps", o->reps, "Repetitions (medians reported)")->check(CLI::PositiveNumber);
  decode->add_option("--threads", o->threads, "Threads (0 = all cores)");
  decode->add_option("--compare-llamacpp", o->compare_llamacpp,
                     "Also run BIN_DIR/llama-bench on the same weights (written as GGUF: int4 Q4_0, int8 Q8_0, "
                     "bf16 BF16); skipped with a line saying why when it cannot run")
      ->option_text("BIN_DIR");
  decode->callback([o] {
    Status s = bench::run_decode_bench(*o);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });

  auto gb = std::make_shared<bench::GrammarBenchOptions>();
  CLI::App* gram = bench->add_subcommand("grammar", "Structured output: token-mask time per token along a JSON document");
  gram->add_option("--tokenizers", gb->tokenizers, "Tokenizer directories (default: ../shared's Qwen3 and Mistral 7B)")
      ->delimiter(',')
      ->check(CLI::ExistingDirectory);
  gram->add_option("--schema", gb->schema_file, "A JSON schema file (default: a built-in invoice schema)")
      ->check(CLI::ExistingFile);
  gram->add_option("--document", gb->document_file, "A document the schema accepts (default: the built-in one)")
      ->check(CLI::ExistingFile);
  gram->add_option("--reps", gb->reps, "Passes over the document, and decode rounds (medians reported)")
      ->check(CLI::PositiveNumber);
  gram->add_option("--model", gb->model_dir, "Also decode with a model: constrained vs unconstrained tokens/s")
      ->check(CLI::ExistingDirectory);
  gram->add_option("--batch", gb->batch, "Concurrent requests in the decode comparison")->check(CLI::PositiveNumber);
  gram->add_option("--new-tokens", gb->new_tokens, "Tokens per request at most (a finished document ends earlier)")
      ->check(CLI::PositiveNumber);
  gram->callback([gb] {
    Status s = bench::run_grammar_bench(*gb);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });

  auto ld = std::make_shared<bench::LoadBenchOptions>();
  CLI::App* load = bench->add_subcommand("load", "Peak and steady resident memory of loading a model, per storage");
  load->add_option("--model", ld->model_dir, "Model directory (e.g. from synth-model --preset 1b)")
      ->required()
      ->check(CLI::ExistingDirectory);
  load->add_option("--dtypes", ld->dtypes, "Weight storages, each loaded in its own child process")
      ->delimiter(',')
      ->check(weight_type_check());
  load->callback([ld] {
    Status s = bench::run_load_bench(*ld);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });

  auto mm = std::make_shared<bench::MatmulBenchOptions>();
  CLI::App* matmul = bench->add_subcommand("matmul", "Weight-matmul kernels: GFLOP/s against the FMA peak of their ISA");
  matmul->add_option("--m", mm->rows, "Rows of x (batch tokens)")->delimiter(',');
  matmul->add_option("--n", mm->out, "Output features")->check(CLI::PositiveNumber);
  matmul->add_option("--k", mm->in, "Input features")->check(CLI::PositiveNumber);
  matmul->add_option("--dtypes", mm->dtypes, "Weight storages")->delimiter(',')->check(weight_type_check());
  matmul->add_option("--reps", mm->reps, "Repetitions (medians reported)")->check(CLI::PositiveNumber);
  matmul->callback([mm] {
    Status s = bench::run_matmul_bench(*mm);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });

  auto q = std::make_shared<bench::QuantBenchOptions>();
  CLI::App* quant = bench->add_subcommand("quant", "Quantised storage against f32: greedy agreement, logit error, bytes");
  quant->add_option("--model", q->model_dir, "Model directory")->required()->check(CLI::ExistingDirectory);
  quant->add_option("--dtypes", q->dtypes, "Storages to compare with f32")->delimiter(',')->check(weight_type_check());
  quant->add_option("--prompts", q->prompts, "Synthetic prompts")->check(CLI::PositiveNumber);
  quant->add_option("--prompt-len", q->prompt_len, "Prompt tokens")->check(CLI::PositiveNumber);
  quant->add_option("--new-tokens", q->new_tokens, "Greedy f32 tokens per prompt")->check(CLI::PositiveNumber);
  quant->add_option("--outlier-threshold", q->outlier_threshold, "int8-outlier: |x| above this runs in f32")
      ->check(CLI::PositiveNumber);
  quant->callback([q] {
    Status s = bench::run_quant_bench(*q);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });

  auto l = std::make_shared<bench::LoraBenchOptions>();
  CLI::App* lora = bench->add_subcommand("lora", "Multi-LoRA decode: no adapter, one, distinct, and merged baseline");
  lora->add_option("--model", l->model_dir, "Model directory")->required()->check(CLI::ExistingDirectory);
  lora->add_option("--adapters-dir", l->adapters_dir, "Where synthetic adapters are kept (written when missing)")
      ->required();
  lora->add_option("--dtype", l->dtype, "Weight storage")->check(weight_type_check());
  lora->add_option("--num-adapters", l->num_adapters, "Registered adapters")->check(CLI::PositiveNumber);
  lora->add_option("--rank", l->rank, "Adapter rank")->check(CLI::PositiveNumber);
  lora->add_option("--requests", l->requests, "Concurrent requests")->check(CLI::PositiveNumber);
  lora->add_option("--prompt-len", l->prompt_len, "Prompt tokens")->check(CLI::PositiveNumber);
  lora->add_option("--new-tokens", l->new_tokens, "Generated tokens per request")->check(CLI::Range(2, 100000));
  lora->add_option("--reps", l->reps, "Repetitions (medians reported)")->check(CLI::PositiveNumber);
  lora->add_option("--merged-sample", l->merged_sample, "Adapters measured for the merged baseline")
      ->check(CLI::PositiveNumber);
  lora->callback([l] {
    Status s = bench::run_lora_bench(*l);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });

  auto z = std::make_shared<bench::ZipfBenchOptions>();
  CLI::App* zipf = bench->add_subcommand("lora-zipf", "Many adapters drawn with Zipf skew under Poisson arrivals");
  zipf->add_option("--model", z->model_dir, "Model directory")->required()->check(CLI::ExistingDirectory);
  zipf->add_option("--adapters-dir", z->adapters_dir, "Where synthetic adapters are kept")->required();
  zipf->add_option("--dtype", z->dtype, "Weight storage")->check(weight_type_check());
  zipf->add_option("--num-adapters", z->num_adapters, "Registered adapters")->check(CLI::PositiveNumber);
  zipf->add_option("--rank", z->rank, "Adapter rank (q_proj, v_proj)")->check(CLI::PositiveNumber);
  zipf->add_option("--zipf", z->zipf_s, "Zipf exponent");
  zipf->add_option("--requests", z->requests, "Requests")->check(CLI::PositiveNumber);
  zipf->add_option("--rate", z->rate, "Poisson arrivals per second")->check(CLI::PositiveNumber);
  zipf->add_option("--prompt-len", z->prompt_len, "Prompt tokens")->check(CLI::PositiveNumber);
  zipf->add_option("--new-tokens", z->new_tokens, "Generated tokens")->check(CLI::PositiveNumber);
  zipf->add_option("--max-loras", z->max_loras, "Adapter slots")->check(CLI::PositiveNumber);
  zipf->add_option("--host-budget-mib", z->host_budget_mib, "Host tier budget")->check(CLI::PositiveNumber);
  zipf->callback([z] {
    Status s = bench::run_zipf_bench(*z);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });

  auto g = std::make_shared<bench::ServeGapOptions>();
  CLI::App* gap =
      bench->add_subcommand("serve-gap", "One concurrent load on the engine and through loragate serve: the ratio");
  gap->add_option("--model", g->model_dir, "Model directory (e.g. from synth-model --preset 110m)")->required();
  gap->add_option("--dtype", g->dtype, "Weight storage")->check(weight_type_check());
  gap->add_option("--requests", g->requests, "Concurrent requests")->check(CLI::PositiveNumber);
  gap->add_option("--prompt-len", g->prompt_len, "Prompt tokens")->check(CLI::PositiveNumber);
  gap->add_option("--new-tokens", g->new_tokens, "Generated tokens per request")->check(CLI::PositiveNumber);
  gap->add_option("--adapters", g->adapters, "Distinct rank-16 adapters, round-robin (0 = the base alone)")
      ->check(CLI::NonNegativeNumber);
  gap->add_option("--adapters-dir", g->adapters_dir, "Where synthetic adapters are kept (written when missing)");
  gap->add_option("--reps", g->reps, "Repetitions, the sides interleaved (medians reported)")
      ->check(CLI::PositiveNumber);
  gap->add_option("--port", g->port, "The serve child's port (0 = any free one)")->check(CLI::Range(0, 65535));
  gap->add_flag("--stream", g->stream, "The HTTP side streams its completions (SSE) instead");
  gap->add_flag("!--no-thread-usage", g->thread_usage, "Leave out the CPU time by thread");
  gap->callback([g] {
    Status s = bench::run_serve_gap_bench(*g);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });

  auto tr = std::make_shared<bench::TrainBenchOptions>();
  auto fx = std::make_shared<bench::TrainFixtureBenchOptions>();
  CLI::App* trn = bench->add_subcommand(
      "train", "LoRA training tokens/s against the compute roof, or the eval fixtures' adapters in seconds");
  trn->add_option("--model", tr->model_dir, "Model directory (e.g. from synth-model --preset 110m)")
      ->check(CLI::ExistingDirectory);
  trn->add_option("--fixtures", fx->eval_dir,
                  "Instead: train the three adapters of this eval folder (../shared/eval) end to end, seconds each")
      ->check(CLI::ExistingDirectory);
  trn->add_option("--base", fx->base, "--fixtures: the base to train on (a folder of bases/, or online)");
  trn->add_option("--dtype", tr->dtype, "Base weight storage")->check(weight_type_check());
  trn->add_option("--data", tr->data_path, "JSONL training file instead of synthetic examples")
      ->check(CLI::ExistingFile);
  trn->add_option("--dump-examples", tr->dump_examples, "Write the examples as JSONL {ids, target} (for torch)");
  trn->add_option("--batch", tr->batch, "Examples per optimizer step")->check(CLI::PositiveNumber);
  trn->add_option("--seq-len", tr->seq_len, "Tokens per synthetic example")->check(CLI::Range(2, 1 << 16));
  trn->add_option("--steps", tr->steps, "Timed optimizer steps per repeat")->check(CLI::PositiveNumber);
  trn->add_option("--rank", tr->rank, "LoRA rank (alpha = 2 x rank)")->check(CLI::Range(1, 4096));
  trn->add_option("--repeats", tr->repeats, "Repetitions, medians reported (default 3; --fixtures: 1)")
      ->check(CLI::PositiveNumber);
  trn->add_option("--threads", tr->threads, "Threads (0 = all cores)");
  trn->callback([tr, fx, trn] {
    Status s;
    if (!fx->eval_dir.empty()) {
      fx->dtype = tr->dtype;
      fx->threads = tr->threads;
      if (trn->count("--repeats") > 0) fx->repeats = tr->repeats;  // else one run of each adapter
      s = bench::run_train_fixture_bench(*fx);
    } else if (tr->model_dir.empty()) {
      s = Status::invalid_argument("bench train needs --model DIR or --fixtures EVAL_DIR");
    } else {
      s = bench::run_train_bench(*tr);
    }
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });
}

}  // namespace loragate::cli

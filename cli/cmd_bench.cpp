// `loragate bench`: benchmarks that print figures (see BENCHMARKS.md).
#include <memory>
#include <string>

#include "bench/decode_bench.h"
#include "cli/commands.h"

namespace loragate::cli {

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks that print figures");
  bench->require_subcommand(1);

  auto o = std::make_shared<bench::DecodeBenchOptions>();
  CLI::App* decode = bench->add_subcommand("decode", "Prefill and batched decode tokens/s against the roofline");
  decode->add_option("--model", o->model_dir, "Model directory (e.g. from synth-model --preset 110m)")
      ->required()
      ->check(CLI::ExistingDirectory);
  decode->add_option("--dtypes", o->dtypes, "Weight storages to compare, interleaved")->delimiter(',');
  decode->add_option("--batches", o->batches, "Decode batch sizes")->delimiter(',');
  decode->add_option("--prompt-len", o->prompt_len, "Prompt tokens")->check(CLI::PositiveNumber);
  decode->add_option("--steps", o->decode_steps, "Timed decode steps")->check(CLI::PositiveNumber);
  decode->add_option("--reps", o->reps, "Repetitions (medians reported)")->check(CLI::PositiveNumber);
  decode->add_option("--threads", o->threads, "Threads (0 = all cores)");
  decode->callback([o] {
    Status s = bench::run_decode_bench(*o);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
  });
}

}  // namespace loragate::cli

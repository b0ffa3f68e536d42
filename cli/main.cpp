// loragate: the single binary — generate, synth-model, bench (serve, adapter
// and eval join as the gateway and evaluator land).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"

namespace loragate::cli {

int fail(const std::string& message) {
  std::cerr << "loragate: " << message << "\n";
  return 1;
}

}  // namespace loragate::cli

namespace {

// libgomp reads its wait settings once, as it loads, before main() runs. Its
// default spins idle workers for ~300k iterations: on a machine whose cores
// are shared (another process, ctest -j2, the gateway's own I/O threads) that
// spinning steals the cores the step loop computes on (measured here: batch-1
// decode fell from 61 to 3.5 tokens/s under load). Fully passive waits cost a
// futex wake per parallel region instead (bf16 batch-1 decode 130 vs 170
// tokens/s on an idle machine). A short spin keeps most of both: when the user
// has set neither knob, re-run ourselves with GOMP_SPINCOUNT set.
void prefer_short_openmp_spins(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  setenv("GOMP_SPINCOUNT", "20000", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then go on as we are
}

}  // namespace

int main(int argc, char** argv) {
  prefer_short_openmp_spins(argv);
  CLI::App app{"loragate: multi-LoRA LLM serving engine"};
  app.require_subcommand(1);
  loragate::cli::add_serve_command(app);
  loragate::cli::add_generate_command(app);
  loragate::cli::add_synth_model_command(app);
  loragate::cli::add_bench_command(app);
  loragate::cli::add_admin_commands(app);
  loragate::cli::add_eval_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {  // a command's own failure, already reported
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}

// loragate: the single binary — serve, generate, train, quantize, upgrade,
// the admin commands (adapter, scenario, base, ...), eval and bench.
#include <iostream>

#include "cli/commands.h"

namespace loragate::cli {

int fail(const std::string& message) {
  std::cerr << "loragate: " << message << "\n";
  return 1;
}

}  // namespace loragate::cli

int main(int argc, char** argv) {
  CLI::App app{"loragate: multi-LoRA LLM serving engine"};
  app.set_version_flag("--version", std::string("loragate ") + LORAGATE_VERSION + " (" + LORAGATE_BUILD_INFO + ")");
  app.require_subcommand(1);
  loragate::cli::add_serve_command(app);
  loragate::cli::add_generate_command(app);
  loragate::cli::add_synth_model_command(app);
  loragate::cli::add_quantize_command(app);
  loragate::cli::add_train_command(app);
  loragate::cli::add_bench_command(app);
  loragate::cli::add_admin_commands(app);
  loragate::cli::add_eval_command(app);
  loragate::cli::add_upgrade_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {  // a command's own failure, already reported
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}

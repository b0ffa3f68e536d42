// The subcommands of the `loragate` binary; each file registers one.
#pragma once

#include <CLI/CLI.hpp>

namespace loragate::cli {

void add_generate_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_synth_model_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_train_command(CLI::App& app);         // train: LoRA fine-tuning (trainer/)
void add_bench_command(CLI::App& app);
void add_admin_commands(CLI::App& app);        // adapter add|rm|ls, scenario set|rm|ls, base ...
void add_base_commands(CLI::App& app);
void add_admin_group_command(CLI::App& app);  // admin prefix-cache reset (called from add_admin_commands)
void add_upgrade_command(CLI::App& app);       // upgrade: retrain, evaluate, promote (server or offline)
void add_eval_command(CLI::App& app);          // eval run|ls|show         // base add|ls|promote|rollback|rm (called from add_admin_commands)
void add_bench_serve_command(CLI::App& bench);  // bench serve (called from add_bench_command)

// Prints "loragate: <message>" to stderr; returns the exit code 1.
int fail(const std::string& message);

}  // namespace loragate::cli

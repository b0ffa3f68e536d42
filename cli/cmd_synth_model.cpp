// `loragate synth-model`: writes a seeded random-weight Llama model in
// Hugging Face layout, for tests and benchmarks.
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/dtype_flag.h"
#include "model/synth_model.h"

namespace loragate::cli {

void add_synth_model_command(CLI::App& app) {
  struct Flags {
    std::string out, preset = "tiny", dtype = "f32";
    uint64_t seed = 0;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("synth-model", "Write a seeded random-weight Llama model");
  cmd->add_option("--out", flags->out, "Output directory")->required();
  cmd->add_option("--preset", flags->preset, "tiny, 110m, 1b or 8b (Llama-3-8B shapes)")
      ->check(CLI::IsMember({"tiny", "110m", "1b", "8b"}));
  cmd->add_option("--seed", flags->seed, "Random seed");
  cmd->add_option("--dtype", flags->dtype, "Tensor dtype in the file: f32 or bf16");
  cmd->callback([flags] {
    Result<DType> dtype = parse_file_dtype(flags->dtype);
    if (!dtype.is_ok()) throw CLI::RuntimeError(fail(dtype.status().message()));
    SynthOptions options{flags->preset, flags->seed, *dtype};
    Status s = write_synth_model(flags->out, options);
    if (!s.is_ok()) throw CLI::RuntimeError(fail(s.to_string()));
    std::cout << "wrote " << flags->preset << " model to " << flags->out << "\n";
  });
}

}  // namespace loragate::cli

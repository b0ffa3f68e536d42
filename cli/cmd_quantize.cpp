// `loragate quantize`: writes a quantised copy of a model directory, to be
// loaded (`--dtype`, `model.dtype`, `base add --dtype`) as its own base.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "common/weight_type.h"
#include "engine/quantize_model.h"

namespace loragate::cli {

void add_quantize_command(CLI::App& app) {
  struct Flags {
    std::string model, out, dtype;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("quantize", "Write a model's weights quantised (int8 or int4) to a new directory");
  cmd->add_option("--model", flags->model, "Model directory with float (f32, f16, bf16) safetensors")->required();
  cmd->add_option("--dtype", flags->dtype, "int8, int4, int4-g64, int4-asym or int4-asym-g64")->required();
  cmd->add_option("--out", flags->out, "New directory to write (must not exist, or be empty)")->required();
  cmd->callback([flags] {
    Result<WeightType> type = parse_weight_type(flags->dtype);
    if (!type.is_ok()) throw CLI::RuntimeError(fail("--dtype: " + type.status().message()));
    const auto start = std::chrono::steady_clock::now();
    Result<QuantizeResult> r = quantize_model(flags->model, flags->out, *type);
    if (!r.is_ok()) throw CLI::RuntimeError(fail(r.status().to_string()));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double mib = 1024.0 * 1024.0;
    std::printf("wrote %s (%s): %.1f MiB from %.1f MiB in %.1f s\nsha256 %s (source %s)\n", r->weights_path.c_str(),
                flags->dtype.c_str(), static_cast<double>(r->bytes) / mib, static_cast<double>(r->source_bytes) / mib,
                seconds, r->sha256.c_str(), r->source_sha256.c_str());
    std::printf("load it with --dtype %s%s\n", flags->dtype.c_str(), flags->dtype == "int8" ? " (or int8-outlier)" : "");
  });
}

}  // namespace loragate::cli

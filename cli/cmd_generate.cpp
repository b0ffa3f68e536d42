// `loragate generate`: one prompt through the engine, printed as text and,
// with --ids, as a JSON line of prompt and generated token ids.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/dtype_flag.h"
#include "engine/engine.h"

namespace loragate::cli {
namespace {

struct GenerateFlags {
  std::string model;
  std::string prompt;
  int32_t max_tokens = 32;
  float temperature = 0.8f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  int64_t seed = -1;
  std::vector<std::string> stop;
  bool ids = false;
  std::string dtype = "f32";
};

int run_generate(const GenerateFlags& f) {
  EngineOptions options;
  Result<DType> dtype = parse_weight_dtype(f.dtype);
  if (!dtype.is_ok()) return fail(dtype.status().message());
  options.weight_dtype = *dtype;
  Result<std::unique_ptr<Engine>> engine = Engine::load(f.model, options);
  if (!engine.is_ok()) return fail(engine.status().to_string());
  const Tokenizer* tok = (*engine)->tokenizer();
  if (tok == nullptr) return fail("no tokenizer.json in " + f.model);

  GenerationRequest req;
  req.prompt_ids = tok->encode(f.prompt, /*add_special_tokens=*/true);
  req.params.max_tokens = f.max_tokens;
  req.params.temperature = f.temperature;
  req.params.top_k = f.top_k;
  req.params.top_p = f.top_p;
  req.params.stop = f.stop;
  if (f.seed >= 0) req.params.seed = static_cast<uint64_t>(f.seed);
  auto results = (*engine)->generate({std::move(req)});
  if (!results.is_ok()) return fail(results.status().to_string());
  const GenerationResult& r = results->front();

  std::cout << f.prompt << r.text << "\n";
  if (f.ids) {
    nlohmann::json line = {{"prompt_ids", r.prompt_ids}, {"generated_ids", r.output_ids}};
    std::cout << line.dump() << "\n";
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate a continuation of a prompt");
  cmd->add_option("--model", flags->model, "Hugging Face model directory")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--prompt", flags->prompt, "Prompt text")->required();
  cmd->add_option("-n,--max-tokens", flags->max_tokens, "Tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", flags->temperature, "0 = greedy");
  cmd->add_option("--top-k", flags->top_k, "Keep the k most likely tokens (0 = all)");
  cmd->add_option("--top-p", flags->top_p, "Nucleus sampling mass");
  cmd->add_option("--seed", flags->seed, "Random seed (>= 0)");
  cmd->add_option("--stop", flags->stop, "Stop string (repeatable)");
  cmd->add_flag("--ids", flags->ids, "Also print a JSON line of prompt and generated ids");
  cmd->add_option("--dtype", flags->dtype, "Weight storage: f32 or bf16");
  cmd->callback([flags] {
    if (int rc = run_generate(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace loragate::cli

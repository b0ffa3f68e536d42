// `loragate generate`: one prompt (optionally with an adapter), or a JSONL
// file of requests run through the scheduler together. Prints text and, with
// --ids, a JSON line of ids; with --requests, one JSON line per request.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "common/weight_type.h"
#include "engine/engine.h"

namespace loragate::cli {
namespace {

struct GenerateFlags {
  std::string model;
  std::optional<std::string> prompt;  // "" is a prompt too: BOS alone
  std::string adapter;        // adapter directory for the single prompt
  std::string requests;       // JSONL file of requests
  int32_t max_tokens = 32;
  float temperature = 0.8f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  int64_t seed = -1;
  std::vector<std::string> stop;
  bool ids = false;
  std::string dtype = "f32";
  std::string device = "cpu";
  int64_t max_batched_tokens = 512;
  int32_t kv_blocks = 0;
  int32_t max_loras = 4;
  int32_t max_lora_rank = 64;
};

// Registers the adapter in `dir` under its path (one name per directory).
Result<std::string> register_adapter(Engine& engine, const std::string& dir) {
  const std::string name = std::filesystem::weakly_canonical(dir).string();
  if (!engine.adapters()->contains(name)) {
    LG_RETURN_IF_ERROR(engine.adapters()->add(name, name));
    LG_RETURN_IF_ERROR(engine.adapters()->load_now(name).with_context("adapter " + dir));
  }
  return name;
}

// One line of a --requests file, turned into an engine request.
Result<GenerationRequest> parse_request_line(Engine& engine, const nlohmann::json& j, const GenerateFlags& f) {
  GenerationRequest r;
  if (j.contains("prompt_ids")) {
    r.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
  } else if (j.contains("prompt")) {
    r.prompt_ids = engine.tokenizer()->encode(j.at("prompt").get<std::string>(), /*add_special_tokens=*/true);
  } else {
    return Status::invalid_argument("needs \"prompt\" or \"prompt_ids\"");
  }
  if (j.contains("adapter") && !j.at("adapter").is_null()) {
    LG_ASSIGN_OR_RETURN(r.adapter, register_adapter(engine, j.at("adapter").get<std::string>()));
  }
  r.params.max_tokens = j.value("max_tokens", f.max_tokens);
  r.params.temperature = j.value("temperature", f.temperature);
  r.params.top_k = j.value("top_k", f.top_k);
  r.params.top_p = j.value("top_p", f.top_p);
  if (j.contains("seed")) r.params.seed = j.at("seed").get<uint64_t>();
  if (j.contains("stop")) r.params.stop = j.at("stop").get<std::vector<std::string>>();
  LG_RETURN_IF_ERROR(engine.validate_request(r));
  return r;
}

int run_requests_file(Engine& engine, const GenerateFlags& f) {
  std::ifstream in(f.requests);
  if (!in) return fail("cannot read " + f.requests);
  std::vector<GenerationRequest> requests;
  std::vector<nlohmann::json> ids;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = f.requests + ":" + std::to_string(n);
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      Result<GenerationRequest> r = parse_request_line(engine, j, f);
      if (!r.is_ok()) return fail(where + ": " + r.status().message());
      ids.push_back(j.value("id", nlohmann::json(n)));
      requests.push_back(std::move(r).value());
    } catch (const nlohmann::json::exception& e) {
      return fail(where + ": " + e.what());
    }
  }
  auto results = engine.generate(std::move(requests));
  if (!results.is_ok()) return fail(results.status().to_string());
  for (size_t i = 0; i < results->size(); ++i) {
    const GenerationResult& r = (*results)[i];
    const double tbt = r.itl_ms.empty() ? 0.0
                                        : std::accumulate(r.itl_ms.begin(), r.itl_ms.end(), 0.0) / r.itl_ms.size();
    nlohmann::json out = {{"id", ids[i]},          {"prompt_ids", r.prompt_ids},
                          {"generated_ids", r.output_ids}, {"text", r.text},
                          {"finish_reason", finish_reason_name(r.finish_reason)},
                          {"ttft_ms", r.ttft_ms},   {"tbt_ms_mean", tbt}};
    if (!r.error.empty()) out["error"] = r.error;
    std::cout << out.dump() << "\n";
  }
  return 0;
}

int run_generate(const GenerateFlags& f) {
  if (f.prompt.has_value() == !f.requests.empty()) return fail("give exactly one of --prompt and --requests");
  EngineOptions options;
  Result<WeightType> dtype = parse_weight_type(f.dtype);
  if (!dtype.is_ok()) return fail(dtype.status().message());
  options.weight_dtype = *dtype;
  Result<Device> device = parse_device(f.device);
  if (!device.is_ok()) return fail("--device: " + device.status().message());
  options.device = *device;
  options.max_num_batched_tokens = f.max_batched_tokens;
  options.kv_num_blocks = f.kv_blocks;
  options.max_loras = f.max_loras;
  options.max_lora_rank = f.max_lora_rank;
  Result<std::unique_ptr<Engine>> loaded = Engine::load(f.model, options);
  if (!loaded.is_ok()) return fail(loaded.status().to_string());
  Engine& engine = **loaded;
  if (engine.tokenizer() == nullptr) return fail("no tokenizer.json in " + f.model);
  if (!f.requests.empty()) return run_requests_file(engine, f);

  GenerationRequest req;
  req.prompt_ids = engine.tokenizer()->encode(*f.prompt, /*add_special_tokens=*/true);
  if (!f.adapter.empty()) {
    Result<std::string> name = register_adapter(engine, f.adapter);
    if (!name.is_ok()) return fail(name.status().to_string());
    req.adapter = *name;
  }
  req.params.max_tokens = f.max_tokens;
  req.params.temperature = f.temperature;
  req.params.top_k = f.top_k;
  req.params.top_p = f.top_p;
  req.params.stop = f.stop;
  if (f.seed >= 0) req.params.seed = static_cast<uint64_t>(f.seed);
  auto results = engine.generate({std::move(req)});
  if (!results.is_ok()) return fail(results.status().to_string());
  const GenerationResult& r = results->front();
  if (r.finish_reason == FinishReason::kError) return fail(r.error);

  std::cout << *f.prompt << r.text << "\n";
  if (f.ids) {
    nlohmann::json line = {{"prompt_ids", r.prompt_ids}, {"generated_ids", r.output_ids}};
    std::cout << line.dump() << "\n";
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate continuations of a prompt or of a file of requests");
  cmd->add_option("--model", flags->model, "Hugging Face model directory")->required()->check(CLI::ExistingDirectory);
  cmd->add_option_function<std::string>(
      "--prompt", [flags](const std::string& text) { flags->prompt = text; }, "Prompt text (\"\" = BOS alone)");
  cmd->add_option("--adapter", flags->adapter, "PEFT LoRA adapter directory for --prompt")->check(CLI::ExistingDirectory);
  cmd->add_option("--requests", flags->requests,
                  "JSONL file, one request per line: {id, prompt | prompt_ids, adapter (dir or null), max_tokens, "
                  "temperature, top_k, top_p, seed, stop}; all run concurrently")
      ->check(CLI::ExistingFile);
  cmd->add_option("-n,--max-tokens", flags->max_tokens, "Tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temperature", flags->temperature, "0 = greedy");
  cmd->add_option("--top-k", flags->top_k, "Keep the k most likely tokens (0 = all)");
  cmd->add_option("--top-p", flags->top_p, "Nucleus sampling mass");
  cmd->add_option("--seed", flags->seed, "Random seed (>= 0)");
  cmd->add_option("--stop", flags->stop, "Stop string (repeatable)");
  cmd->add_flag("--ids", flags->ids, "Also print a JSON line of prompt and generated ids");
  cmd->add_option("--device", flags->device, "Where the model runs: cpu, cuda or cuda:N");
  cmd->add_option("--dtype", flags->dtype, "Weight storage: f32, bf16, int8, int8-outlier, int4, int4-g64, int4-asym or int4-asym-g64");
  cmd->add_option("--max-batched-tokens", flags->max_batched_tokens, "Token budget per step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-blocks", flags->kv_blocks, "KV cache blocks of 16 tokens (0 = from the memory budget)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-loras", flags->max_loras, "Adapter slots usable in one step")->check(CLI::PositiveNumber);
  cmd->add_option("--max-lora-rank", flags->max_lora_rank, "Largest adapter rank")->check(CLI::PositiveNumber);
  cmd->callback([flags] {
    if (int rc = run_generate(*flags); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace loragate::cli

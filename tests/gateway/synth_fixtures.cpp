// Chooses the gateway tests' fixtures, and builds the synthetic ones (see synth_fixtures.h).
#include "tests/gateway/synth_fixtures.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/synth_adapter.h"
#include "engine/engine.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate::testing {
namespace {

constexpr const char* kPrompt = "Once upon a time";
constexpr int kNewTokens = 48;  // what GatewayTest::greedy() asks for

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "gateway test fixtures: %s\n", why.c_str());
  std::abort();
}

void check(const Status& s, const std::string& what) {
  if (!s.is_ok()) die(what + ": " + s.to_string());
}

// Greedy continuations of kPrompt for the base ("base") and each adapter, as golden.json has them.
nlohmann::json golden(const std::string& models) {
  EngineOptions o;
  o.max_loras = 4;
  Result<std::unique_ptr<Engine>> engine = Engine::load(models + "/stories260K", o);
  check(engine.status(), "cannot load the synthetic model");
  const std::vector<int32_t> prompt = (*engine)->tokenizer()->encode(kPrompt, /*add_special_tokens=*/true);
  nlohmann::json outputs;
  for (const std::string which : {"base", "a", "b", "c"}) {
    if (which != "base") check((*engine)->adapters()->add(which, models + "/stories260K-lora/" + which), which);
    GenerationRequest r;
    r.prompt_ids = prompt;
    r.params.temperature = 0.0f;
    r.params.max_tokens = kNewTokens;
    r.adapter = which == "base" ? "" : which;
    std::vector<GenerationRequest> one;
    one.push_back(std::move(r));
    Result<std::vector<GenerationResult>> done = (*engine)->generate(std::move(one));
    check(done.status(), "cannot generate with " + which);
    const GenerationResult& g = done->at(0);
    outputs[which] = {{"generated_ids", g.output_ids}, {"continuation_text", g.text}};
  }
  return {{"cases", {{{"prompt", kPrompt},
                      {"prompt_ids", prompt},
                      {"num_prompt_tokens", prompt.size()},
                      {"outputs", outputs}}}}};
}

std::string build() {
  const std::string root = make_temp_dir("lg-gateway-fixtures");
  if (root.empty()) die("cannot make a temporary directory");
  const std::string models = root + "/models";
  SynthOptions model;
  model.preset = "tiny";
  model.seed = 1;
  check(write_synth_model(models + "/stories260K", model), "cannot write the synthetic model");
  Result<ModelConfig> config = synth_preset_config("tiny");
  check(config.status(), "tiny preset");
  uint64_t seed = 1;
  for (const char* name : {"a", "b", "c"}) {
    SynthAdapterOptions a;
    a.rank = 8;
    a.lora_alpha = 16;
    a.seed = seed++;
    check(write_synth_adapter(models + "/stories260K-lora/" + name, *config, a), name);
  }
  std::ofstream(models + "/golden.json") << golden(models).dump(1);
  return root;
}

// The fixture folder; `built` ones are removed when the process exits.
struct FixtureDir {
  std::string path;
  bool built = false;
  ~FixtureDir() {
    std::error_code ignored;
    if (built) std::filesystem::remove_all(path, ignored);
  }
};

const FixtureDir& fixtures() {
  static const FixtureDir dir = [] {
    const char* want = std::getenv("LORAGATE_GATEWAY_FIXTURES");
    const bool synth = want != nullptr && std::string(want) == "synth";
    if (!synth && shared_exists("models/stories260K/model.safetensors") && shared_exists("models/golden.json") &&
        shared_exists("models/stories260K-lora/c")) {
      return FixtureDir{shared_dir(), false};
    }
    return FixtureDir{build(), true};
  }();
  return dir;
}

}  // namespace

const std::string& gateway_fixture_dir() { return fixtures().path; }

bool gateway_serves_stories260k() { return !fixtures().built; }

}  // namespace loragate::testing

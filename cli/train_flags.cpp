#include "cli/train_flags.h"

#include <fstream>
#include <sstream>

#include "trainer/train_config.h"

namespace loragate::cli {

using nlohmann::json;

std::shared_ptr<TrainFlags> add_train_flags(CLI::App* cmd) {
  auto f = std::make_shared<TrainFlags>();
  f->given["--train-config"] =
      cmd->add_option("--train-config", f->config_file, "Training config JSON (keys of `loragate train`'s config)")
          ->check(CLI::ExistingFile);
  f->given["--rank"] = cmd->add_option("--rank", f->rank, "LoRA rank (default 8)")->check(CLI::Range(1, 4096));
  f->given["--alpha"] = cmd->add_option("--alpha", f->alpha, "LoRA alpha (default 16)");
  f->given["--targets"] = cmd->add_option("--targets", f->targets, "Adapted projections (default q,k,v,o,gate,up,down)");
  f->given["--steps"] = cmd->add_option("--steps", f->steps, "Optimizer steps (default 200)")->check(CLI::PositiveNumber);
  f->given["--batch"] = cmd->add_option("--batch", f->batch, "Examples per step (default 16)")->check(CLI::PositiveNumber);
  f->given["--lr"] = cmd->add_option("--lr", f->lr, "Learning rate (default 2e-3)");
  f->given["--seed"] = cmd->add_option("--seed", f->seed, "Seed of the LoRA init and the data order (default 7000)");
  return f;
}

bool any_train_flag(const TrainFlags& f) {
  for (const auto& [name, option] : f.given) {
    if (option->count() > 0) return true;
  }
  return false;
}

Result<json> train_config_json(const TrainFlags& f) {
  json config = json::object();
  if (!f.config_file.empty()) {
    std::ifstream in(f.config_file);
    std::stringstream text;
    text << in.rdbuf();
    config = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) return Status::invalid_argument(f.config_file + ": not a JSON object");
  }
  auto set = [&](const char* flag) { return f.given.at(flag)->count() > 0; };
  if (set("--rank")) config["lora"]["rank"] = f.rank;
  if (set("--alpha")) config["lora"]["alpha"] = f.alpha;
  if (set("--targets")) {
    json targets = json::array();
    std::stringstream list(f.targets);
    for (std::string t; std::getline(list, t, ',');) {
      if (!t.empty()) targets.push_back(t);
    }
    config["lora"]["targets"] = targets;
  }
  if (set("--steps")) config["steps"] = f.steps;
  if (set("--batch")) config["batch"] = f.batch;
  if (set("--lr")) config["optimizer"]["lr"] = f.lr;
  if (set("--seed")) config["seed"] = f.seed;
  Result<train::TrainConfig> parsed = train::train_config_from_json(config);
  if (!parsed.is_ok()) {
    return parsed.status().with_context(f.config_file.empty() ? "training flags" : f.config_file);
  }
  return train::to_json(*parsed);
}

}  // namespace loragate::cli

// TrainConfig <-> JSON, with every key checked.
#include "trainer/train_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace loragate::train {
namespace {

using nlohmann::json;

const char* schedule_name(Schedule s) { return s == Schedule::kCosine ? "cosine" : "constant"; }
const char* sampling_name(Sampling s) { return s == Sampling::kShuffle ? "shuffle" : "replacement"; }

// Reads the keys of one JSON object, refusing unknown ones and bad values.
class Reader {
 public:
  Reader(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  Status check_keys(const std::set<std::string>& known) const {
    if (!j_.is_object()) return Status::invalid_argument(where_ + " must be an object");
    for (const auto& [key, value] : j_.items())
      if (!known.count(key)) return Status::invalid_argument(where_ + ": unknown key '" + key + "'");
    return Status::ok();
  }

  Status number(const char* key, double& out, double min, double max) const {
    if (!j_.contains(key)) return Status::ok();
    const json& v = j_.at(key);
    if (!v.is_number()) return Status::invalid_argument(name(key) + " must be a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < min || x > max)
      return Status::invalid_argument(name(key) + " must lie in [" + fmt(min) + ", " + fmt(max) + "]");
    out = x;
    return Status::ok();
  }

  Status integer(const char* key, int64_t& out, int64_t min, int64_t max) const {
    if (!j_.contains(key)) return Status::ok();
    const json& v = j_.at(key);
    if (!v.is_number_integer()) return Status::invalid_argument(name(key) + " must be an integer");
    const int64_t x = v.get<int64_t>();
    if (x < min || x > max)
      return Status::invalid_argument(name(key) + " must lie in [" + std::to_string(min) + ", " +
                                      std::to_string(max) + "]");
    out = x;
    return Status::ok();
  }

  Status boolean(const char* key, bool& out) const {
    if (!j_.contains(key)) return Status::ok();
    if (!j_.at(key).is_boolean()) return Status::invalid_argument(name(key) + " must be true or false");
    out = j_.at(key).get<bool>();
    return Status::ok();
  }

  Status choice(const char* key, std::string& out, const std::set<std::string>& allowed) const {
    if (!j_.contains(key)) return Status::ok();
    const json& v = j_.at(key);
    if (!v.is_string() || !allowed.count(v.get<std::string>())) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return Status::invalid_argument(name(key) + " must be one of " + list);
    }
    out = v.get<std::string>();
    return Status::ok();
  }

  std::string name(const char* key) const { return where_ + "." + key; }

 private:
  // Enough digits to tell a bound apart: std::to_string printed 1e-30 as
  // "0.000000" and 0.999999999 as "1.000000".
  static std::string fmt(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", x);
    return buf;
  }
  const json& j_;
  std::string where_;
};

Result<LoraRecipe> recipe_from_json(const json& j) {
  Reader r(j, "lora");
  LG_RETURN_IF_ERROR(r.check_keys({"rank", "alpha", "use_rslora", "targets", "layers"}));
  LoraRecipe out;
  LG_RETURN_IF_ERROR(r.integer("rank", out.rank, 1, 4096));
  LG_RETURN_IF_ERROR(r.number("alpha", out.alpha, 1e-6, 65536));
  LG_RETURN_IF_ERROR(r.boolean("use_rslora", out.use_rslora));
  if (j.contains("targets")) {
    const json& t = j.at("targets");
    if (!t.is_array() || t.empty()) return Status::invalid_argument("lora.targets must be a non-empty list");
    out.targets.clear();
    for (const json& name : t) {
      std::optional<LoraModule> m;
      if (name.is_string()) m = parse_lora_target(name.get<std::string>());
      if (!m) return Status::invalid_argument("lora.targets: unknown module; valid: " + lora_module_names_list());
      for (LoraModule seen : out.targets)
        if (seen == *m) return Status::invalid_argument("lora.targets names " + std::string(lora_module_name(*m)) + " twice");
      out.targets.push_back(*m);
    }
  }
  if (j.contains("layers")) {
    const json& l = j.at("layers");
    if (!l.is_array()) return Status::invalid_argument("lora.layers must be a list of layer indices");
    for (const json& x : l) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 100000)
        return Status::invalid_argument("lora.layers must hold layer indices >= 0");
      out.layers.push_back(x.get<int64_t>());
    }
  }
  return out;
}

Result<OptimizerConfig> optimizer_from_json(const json& j) {
  Reader r(j, "optimizer");
  LG_RETURN_IF_ERROR(r.check_keys(
      {"lr", "beta1", "beta2", "eps", "weight_decay", "warmup_steps", "schedule", "max_grad_norm"}));
  OptimizerConfig out;
  LG_RETURN_IF_ERROR(r.number("lr", out.lr, 0, 10));
  LG_RETURN_IF_ERROR(r.number("beta1", out.beta1, 0, 0.999999));
  LG_RETURN_IF_ERROR(r.number("beta2", out.beta2, 0, 0.999999999));
  LG_RETURN_IF_ERROR(r.number("eps", out.eps, 1e-30, 1));
  LG_RETURN_IF_ERROR(r.number("weight_decay", out.weight_decay, 0, 10));
  LG_RETURN_IF_ERROR(r.integer("warmup_steps", out.warmup_steps, 0, int64_t{1} << 40));
  std::string schedule = schedule_name(out.schedule);
  LG_RETURN_IF_ERROR(r.choice("schedule", schedule, {"constant", "cosine"}));
  out.schedule = schedule == "cosine" ? Schedule::kCosine : Schedule::kConstant;
  LG_RETURN_IF_ERROR(r.number("max_grad_norm", out.max_grad_norm, 0, 1e9));
  return out;
}

}  // namespace

std::optional<LoraModule> parse_lora_target(std::string_view name) {
  if (auto m = lora_module_from_name(name)) return m;
  for (LoraModule m : kAllLoraModules) {
    const std::string_view full = lora_module_name(m);  // "q_proj"
    if (name == full.substr(0, full.size() - 5)) return m;
  }
  return std::nullopt;
}

float LoraRecipe::scaling() const {
  const double r = static_cast<double>(rank);
  return static_cast<float>(use_rslora ? alpha / std::sqrt(r) : alpha / r);
}

int64_t TrainConfig::total_steps(int64_t examples) const {
  if (epochs <= 0) return steps;
  const double per_step = static_cast<double>(batch * grad_accum);
  // Capped before the cast: a double past int64's range does not convert (UB).
  const double steps_needed = std::ceil(epochs * static_cast<double>(examples) / per_step);
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(steps_needed, 0x1p40)));
}

nlohmann::json to_json(const TrainConfig& c) {
  json targets = json::array();
  for (LoraModule m : c.lora.targets) targets.push_back(std::string(lora_module_name(m)));
  return {
      {"lora",
       {{"rank", c.lora.rank},
        {"alpha", c.lora.alpha},
        {"use_rslora", c.lora.use_rslora},
        {"targets", targets},
        {"layers", c.lora.layers}}},
      {"optimizer",
       {{"lr", c.optimizer.lr},
        {"beta1", c.optimizer.beta1},
        {"beta2", c.optimizer.beta2},
        {"eps", c.optimizer.eps},
        {"weight_decay", c.optimizer.weight_decay},
        {"warmup_steps", c.optimizer.warmup_steps},
        {"schedule", schedule_name(c.optimizer.schedule)},
        {"max_grad_norm", c.optimizer.max_grad_norm}}},
      {"steps", c.steps},
      {"epochs", c.epochs},
      {"batch", c.batch},
      {"grad_accum", c.grad_accum},
      {"seed", c.seed},
      {"sampling", sampling_name(c.sampling)},
      {"max_seq_len", c.max_seq_len},
      {"checkpoint_every", c.checkpoint_every},
  };
}

Result<TrainConfig> train_config_from_json(const nlohmann::json& j) {
  Reader r(j, "train");
  LG_RETURN_IF_ERROR(r.check_keys({"lora", "optimizer", "steps", "epochs", "batch", "grad_accum", "seed",
                                   "sampling", "max_seq_len", "checkpoint_every"}));
  TrainConfig out;
  if (j.contains("lora")) { LG_ASSIGN_OR_RETURN(out.lora, recipe_from_json(j.at("lora"))); }
  if (j.contains("optimizer")) { LG_ASSIGN_OR_RETURN(out.optimizer, optimizer_from_json(j.at("optimizer"))); }
  LG_RETURN_IF_ERROR(r.integer("steps", out.steps, 1, int64_t{1} << 40));
  LG_RETURN_IF_ERROR(r.number("epochs", out.epochs, 0, 1e6));
  LG_RETURN_IF_ERROR(r.integer("batch", out.batch, 1, 1 << 20));
  LG_RETURN_IF_ERROR(r.integer("grad_accum", out.grad_accum, 1, 1 << 20));
  if (j.contains("seed")) {
    // A negative seed would wrap silently to a huge unsigned one.
    const json& seed = j.at("seed");
    if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<int64_t>() >= 0))
      return Status::invalid_argument("train.seed must be an integer >= 0");
    out.seed = j.at("seed").get<uint64_t>();
  }
  std::string sampling = sampling_name(out.sampling);
  LG_RETURN_IF_ERROR(r.choice("sampling", sampling, {"replacement", "shuffle"}));
  out.sampling = sampling == "shuffle" ? Sampling::kShuffle : Sampling::kReplacement;
  LG_RETURN_IF_ERROR(r.integer("max_seq_len", out.max_seq_len, 2, 1 << 20));
  LG_RETURN_IF_ERROR(r.integer("checkpoint_every", out.checkpoint_every, 0, int64_t{1} << 40));
  return out;
}

}  // namespace loragate::train

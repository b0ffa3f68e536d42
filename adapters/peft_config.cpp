// PeftConfig: adapter_config.json parsing, validation and PEFT's targeting rules.
#include "adapters/peft_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "adapters/adapter_dir.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;
// Ordered: rank_pattern / alpha_pattern keys are tried in file order, as PEFT does.
using json = nlohmann::ordered_json;

// The one value PEFT expands to every linear layer except the output head.
constexpr const char* kAllLinear = "all-linear";

std::string describe(const json& j) {
  if (j.is_primitive()) {
    std::string s = std::string(j.type_name()) + " " + j.dump();
    if (s.size() > 80) s = s.substr(0, 77) + "...";
    return s;
  }
  return j.type_name();
}

std::string last_component(const std::string& dotted) {
  const size_t dot = dotted.rfind('.');
  return dot == std::string::npos ? dotted : dotted.substr(dot + 1);
}

bool is_plain_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// PEFT's list rule: a path matches an entry when it equals it or ends with "." + entry.
bool path_matches_name(const std::string& path, const std::string& name) {
  if (path == name) return true;
  return path.size() > name.size() && path.compare(path.size() - name.size(), name.size(), name) == 0 &&
         path[path.size() - name.size() - 1] == '.';
}

// Reads the keys of one adapter_config.json object, with errors naming the file and key.
class Reader {
 public:
  Reader(const json& obj, const std::string& source) : obj_(obj), source_(source) {}

  const json* get(const std::string& key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  Status invalid(const std::string& key, const std::string& why) const {
    return Status::invalid_argument(source_ + ": key '" + key + "' " + why);
  }
  Status unsupported(const std::string& key, const std::string& why) const {
    return Status::unsupported(source_ + ": key '" + key + "' " + why);
  }
  Status bad_type(const std::string& key, const char* want, const json& got) const {
    return invalid(key, std::string("must be ") + want + ", got " + describe(got));
  }

  Status int_value(const std::string& key, const json& j, int64_t* out) const {
    if (j.is_number_unsigned()) {
      const uint64_t v = j.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return invalid(key, "is out of range: " + describe(j));
      }
      *out = static_cast<int64_t>(v);
      return Status::ok();
    }
    if (j.is_number_integer()) {
      *out = j.get<int64_t>();
      return Status::ok();
    }
    return bad_type(key, "an integer", j);
  }
  Status opt_bool(const std::string& key, bool* out) const {
    const json* j = get(key);
    if (!j) return Status::ok();
    if (!j->is_boolean()) return bad_type(key, "a boolean", *j);
    *out = j->get<bool>();
    return Status::ok();
  }
  Status positive_number(const std::string& key, const json& j, double* out) const {
    if (!j.is_number()) return bad_type(key, "a number", j);
    const double v = j.get<double>();
    if (!std::isfinite(v) || v <= 0) return invalid(key, "must be positive, got " + describe(j));
    *out = v;
    return Status::ok();
  }
  // A key that must be absent, null, false, or an empty list/object/string.
  bool is_set(const std::string& key) const {
    const json* j = get(key);
    if (!j) return false;
    if (j->is_boolean()) return j->get<bool>();
    if (j->is_array() || j->is_object() || j->is_string()) return !j->empty();
    return true;
  }

 private:
  const json& obj_;
  const std::string& source_;
};

#if defined(__GLIBCXX__)
// libstdc++ matches by backtracking by default, in exponential time for nested
// repeats (".**x"); __polynomial selects its Thompson-NFA matcher, polynomial
// in pattern and text (it refuses back-references, which module names never need).
constexpr std::regex::flag_type kRegexFlags = std::regex::ECMAScript | std::regex_constants::__polynomial;
#else
constexpr std::regex::flag_type kRegexFlags = std::regex::ECMAScript;
#endif

Result<std::shared_ptr<const std::regex>> compile(const Reader& r, const std::string& key,
                                                  const std::string& text,
                                                  const std::string& regex_text) {
  // libstdc++ overflows (UB) reading a back-reference or {n,m} count past
  // int64; no module pattern needs a number of more than 9 digits.
  for (size_t i = 0, run = 0; i < regex_text.size(); ++i) {
    run = std::isdigit(static_cast<unsigned char>(regex_text[i])) ? run + 1 : 0;
    if (run > 9) return r.invalid(key, "has a number of more than 9 digits in regular expression '" + text + "'");
  }
  try {
    return std::make_shared<const std::regex>(regex_text, kRegexFlags);
  } catch (const std::regex_error& e) {
    return r.invalid(key, "has an invalid regular expression '" + text + "': " + e.what());
  }
}

// A target_modules list entry must name one of the seven linear modules
// (possibly as a longer path suffix such as "self_attn.q_proj").
Status check_target_name(const Reader& r, const std::string& key, const std::string& name) {
  if (name.empty()) return r.invalid(key, "contains an empty module name");
  if (!lora_module_from_name(last_component(name))) {
    return r.unsupported(key, "names module '" + name +
                                  "', which loragate cannot adapt; LoRA is supported on " +
                                  lora_module_names_list() + " only");
  }
  return Status::ok();
}

// Appends the strings of a JSON list of strings.
Status string_list(const Reader& r, const std::string& key, const json& j,
                   std::vector<std::string>* out) {
  if (!j.is_array()) return r.bad_type(key, "a list of strings", j);
  for (const json& item : j) {
    if (!item.is_string()) return r.bad_type(key, "a list of strings", item);
    out->push_back(item.get<std::string>());
  }
  return Status::ok();
}

}  // namespace

Result<PeftConfig> PeftConfig::parse(const std::string& json_text, const std::string& source) {
  const json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::corrupt(source + ": not valid JSON");
  if (!doc.is_object()) return Status::corrupt(source + ": the top level must be a JSON object");
  const Reader r(doc, source);

  PeftConfig c;
  c.source_ = source;

  // --- what kind of adapter ---------------------------------------------------
  const json* peft_type = r.get("peft_type");
  if (!peft_type) return r.invalid("peft_type", "is missing (expected \"LORA\")");
  if (!peft_type->is_string()) return r.bad_type("peft_type", "a string", *peft_type);
  if (peft_type->get<std::string>() != "LORA") {
    return r.unsupported("peft_type", "is '" + peft_type->get<std::string>() +
                                          "'; only LORA adapters are supported");
  }
  bool use_dora = false;
  LG_RETURN_IF_ERROR(r.opt_bool("use_dora", &use_dora));
  if (use_dora) {
    return Status::unsupported(source + ": DoRA adapters are not supported (use_dora is true)");
  }
  if (r.is_set("modules_to_save")) {
    return r.unsupported("modules_to_save", "is " + r.get("modules_to_save")->dump() +
                                                "; adapters that replace whole modules are not "
                                                "supported");
  }
  if (const json* bias = r.get("bias")) {
    if (!bias->is_string()) return r.bad_type("bias", "a string", *bias);
    if (bias->get<std::string>() != "none") {
      return r.unsupported("bias", "is '" + bias->get<std::string>() +
                                       "'; only \"none\" is supported (adapters with trained "
                                       "biases are not)");
    }
  }
  bool flag = false;
  LG_RETURN_IF_ERROR(r.opt_bool("fan_in_fan_out", &flag));
  if (flag) return r.unsupported("fan_in_fan_out", "is true; only [out, in] (Linear) weights are supported");
  flag = false;
  LG_RETURN_IF_ERROR(r.opt_bool("lora_bias", &flag));
  if (flag) return r.unsupported("lora_bias", "is true; LoRA B biases are not supported");
  for (const char* key : {"layer_replication", "target_parameters", "trainable_token_indices",
                          "alora_invocation_tokens"}) {
    if (r.is_set(key)) return r.unsupported(key, "is set; this PEFT feature is not supported");
  }

  // --- rank, alpha, scaling ------------------------------------------------------
  if (const json* j = r.get("r")) {
    LG_RETURN_IF_ERROR(r.int_value("r", *j, &c.r_));
    if (c.r_ <= 0) return r.invalid("r", "must be positive, got " + describe(*j));
  }
  // Trained adapters use alphas of 1..512; past kMaxLoraAlpha the update
  // would swamp the base (1e308 was accepted and gave garbage).
  auto alpha_in_range = [&](const std::string& key, double alpha) -> Status {
    if (alpha > kMaxLoraAlpha) {
      return r.invalid(key, "must be at most " + std::to_string(static_cast<int64_t>(kMaxLoraAlpha)) + ", got " +
                                std::to_string(alpha));
    }
    return Status::ok();
  };
  if (const json* j = r.get("lora_alpha")) {
    LG_RETURN_IF_ERROR(r.positive_number("lora_alpha", *j, &c.lora_alpha_));
    LG_RETURN_IF_ERROR(alpha_in_range("lora_alpha", c.lora_alpha_));
  }
  LG_RETURN_IF_ERROR(r.opt_bool("use_rslora", &c.use_rslora_));

  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    const json* j = r.get(key);
    if (!j) continue;
    if (!j->is_object()) return r.bad_type(key, "an object of pattern -> value", *j);
    const bool is_rank = std::string(key) == "rank_pattern";
    for (const auto& [pattern, value] : j->items()) {
      const std::string where = std::string(key) + "." + pattern;
      LG_ASSIGN_OR_RETURN(auto re, compile(r, key, pattern, "(.*\\.)?(?:" + pattern + ")"));
      Pattern p{pattern, std::move(re)};
      if (is_rank) {
        int64_t rank = 0;
        LG_RETURN_IF_ERROR(r.int_value(where, value, &rank));
        if (rank <= 0) return r.invalid(where, "must be a positive rank, got " + describe(value));
        c.rank_pattern_.emplace_back(std::move(p), rank);
      } else {
        double alpha = 0;
        LG_RETURN_IF_ERROR(r.positive_number(where, value, &alpha));
        LG_RETURN_IF_ERROR(alpha_in_range(where, alpha));
        c.alpha_pattern_.emplace_back(std::move(p), alpha);
      }
    }
  }

  // --- which modules -------------------------------------------------------------
  const json* targets = r.get("target_modules");
  if (!targets) return r.invalid("target_modules", "is missing");
  if (targets->is_string()) {
    const std::string t = targets->get<std::string>();
    if (t == kAllLinear) {
      for (LoraModule m : kAllLoraModules) c.target_names_.emplace_back(lora_module_name(m));
    } else if (is_plain_name(t)) {
      LG_RETURN_IF_ERROR(check_target_name(r, "target_modules", t));
      c.target_names_.push_back(t);
    } else {
      LG_ASSIGN_OR_RETURN(auto re, compile(r, "target_modules", t, t));
      // PEFT would put LoRA on these too; we cannot serve that.
      for (const char* other : {"model.embed_tokens", "lm_head", "model.norm"}) {
        if (std::regex_match(std::string(other), *re)) {
          return r.unsupported("target_modules", "regex '" + t + "' matches module '" + other +
                                                     "'; LoRA is supported on " +
                                                     lora_module_names_list() + " only");
        }
      }
      c.target_regex_ = Pattern{t, std::move(re)};
    }
  } else {
    LG_RETURN_IF_ERROR(string_list(r, "target_modules", *targets, &c.target_names_));
    if (c.target_names_.empty()) return r.invalid("target_modules", "is empty");
    for (const std::string& name : c.target_names_) {
      LG_RETURN_IF_ERROR(check_target_name(r, "target_modules", name));
    }
  }

  if (const json* ex = r.get("exclude_modules")) {
    if (ex->is_string()) {
      const std::string t = ex->get<std::string>();
      LG_ASSIGN_OR_RETURN(auto re, compile(r, "exclude_modules", t, t));
      c.exclude_regex_ = Pattern{t, std::move(re)};
    } else {
      LG_RETURN_IF_ERROR(string_list(r, "exclude_modules", *ex, &c.exclude_names_));
    }
  }

  if (const json* layers = r.get("layers_to_transform")) {
    auto add = [&](const json& v) -> Status {
      int64_t layer = 0;
      LG_RETURN_IF_ERROR(r.int_value("layers_to_transform", v, &layer));
      if (layer < 0) return r.invalid("layers_to_transform", "has a negative layer " + describe(v));
      c.layers_to_transform_.push_back(layer);
      return Status::ok();
    };
    if (layers->is_array()) {
      for (const json& v : *layers) LG_RETURN_IF_ERROR(add(v));
    } else {
      LG_RETURN_IF_ERROR(add(*layers));
    }
    std::sort(c.layers_to_transform_.begin(), c.layers_to_transform_.end());
    c.layers_to_transform_.erase(
        std::unique(c.layers_to_transform_.begin(), c.layers_to_transform_.end()),
        c.layers_to_transform_.end());
  }
  // layers_pattern names the module list holding the decoder layers; in a
  // Llama-family model that is "layers", and any other name matches nothing.
  if (const json* lp = r.get("layers_pattern"); lp && !c.layers_to_transform_.empty()) {
    std::vector<std::string> names;
    if (lp->is_string()) {
      if (!lp->get<std::string>().empty()) names.push_back(lp->get<std::string>());
    } else {
      LG_RETURN_IF_ERROR(string_list(r, "layers_pattern", *lp, &names));
    }
    if (!names.empty() && std::find(names.begin(), names.end(), "layers") == names.end()) {
      return r.unsupported("layers_pattern", "is " + lp->dump() +
                                                 "; the decoder layers of this model family are "
                                                 "under \"layers\"");
    }
  }

  if (const json* j = r.get("base_model_name_or_path"); j && j->is_string()) {
    c.base_model_ = j->get<std::string>();
  }
  return c;
}

Result<PeftConfig> PeftConfig::load(const AdapterDir& dir) {
  const std::string path = (fs::path(dir.path()) / "adapter_config.json").string();  // named in errors
  LG_ASSIGN_OR_RETURN(const std::string real, dir.file("adapter_config.json"));
  std::ifstream in(real, std::ios::binary);
  if (!in) return Status::io_error(path + ": cannot be opened for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::io_error(path + ": read failed");
  return parse(text.str(), path);
}

Result<PeftConfig> PeftConfig::load(const std::string& dir) {
  LG_ASSIGN_OR_RETURN(AdapterDir d, AdapterDir::open(dir));
  return load(d);
}

float PeftConfig::scaling_for(int64_t rank, double alpha) const {
  const double denom = use_rslora_ ? std::sqrt(static_cast<double>(rank)) : static_cast<double>(rank);
  return static_cast<float>(alpha / denom);
}

bool PeftConfig::excluded(const std::string& path) const {
  if (exclude_regex_) return std::regex_match(path, *exclude_regex_->re);
  return std::any_of(exclude_names_.begin(), exclude_names_.end(),
                     [&](const std::string& n) { return path_matches_name(path, n); });
}

bool PeftConfig::matches_targets(int64_t layer, const std::string& path) const {
  // PEFT applies layers_to_transform only to the list form, and not to an
  // entry that spells out the whole path.
  if (target_regex_) return std::regex_match(path, *target_regex_->re);
  if (std::find(target_names_.begin(), target_names_.end(), path) != target_names_.end()) return true;
  const bool found = std::any_of(target_names_.begin(), target_names_.end(),
                                 [&](const std::string& n) { return path_matches_name(path, n); });
  if (!found || layers_to_transform_.empty()) return found;
  return std::binary_search(layers_to_transform_.begin(), layers_to_transform_.end(), layer);
}

std::optional<LoraTarget> PeftConfig::target(int64_t layer, LoraModule module) const {
  const std::string path = lora_module_path(layer, module);
  if (excluded(path) || !matches_targets(layer, path)) return std::nullopt;
  LoraTarget t;
  t.rank = r_;
  t.alpha = lora_alpha_;
  for (const auto& [p, rank] : rank_pattern_) {
    if (std::regex_match(path, *p.re)) {
      t.rank = rank;
      break;
    }
  }
  for (const auto& [p, alpha] : alpha_pattern_) {
    if (std::regex_match(path, *p.re)) {
      t.alpha = alpha;
      break;
    }
  }
  t.scaling = scaling_for(t.rank, t.alpha);
  return t;
}

}  // namespace loragate

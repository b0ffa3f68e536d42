// parse_suite_spec (suite.h): the suite's YAML, its keys, types and caps.
// Reads no file: paths are resolved lexically here, really in suite.cpp.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>

#include "evaluator/suite.h"
#include "registry/records.h"

namespace loragate::eval {
namespace {

// yaml-cpp's message up to its first ':': the fixed phrase ("end of map not
// found"), without the key or anchor some messages append from the file.
std::string yaml_phrase(const std::string& msg) { return msg.substr(0, msg.find(':')); }

constexpr size_t kMaxStops = 16;  // stop strings per scenario

std::string yaml_known_list(const std::set<std::string>& known) {
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
  return list;
}

// A key of the file as errors name it: a plain name as it is, anything else not at all.
std::string yaml_key_name(const std::string& key) {
  const bool plain = !key.empty() && key.size() <= 40 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
  return plain ? key : "(a key that is not a plain name)";
}

// "file:line: key.path: what", the line of `node` (1-based).
struct YamlWhere {
  const std::string& file;

  Status error(const YAML::Node& node, const std::string& field, const std::string& what) const {
    const int line = node.Mark().line;
    return Status::invalid_argument(file + (line >= 0 ? ":" + std::to_string(line + 1) : "") + ": " + field + ": " +
                                    what);
  }
};

Status yaml_check_keys(const YAML::Node& map, const std::string& path, const std::set<std::string>& known,
                  const YamlWhere& w) {
  for (const auto& kv : map) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (!known.count(key)) {
      const std::string name = yaml_key_name(key);
      return w.error(kv.first, path.empty() ? name : path + "." + name,
                     "unknown key (known: " + yaml_known_list(known) + ")");
    }
  }
  return Status::ok();
}

Status yaml_string(const YAML::Node& node, const std::string& field, const YamlWhere& w, std::string* out) {
  if (!node.IsScalar() || node.Scalar().empty()) return w.error(node, field, "must be a non-empty string");
  *out = node.Scalar();
  return Status::ok();
}

// `p` as given when absolute, else against the suite file's directory.
std::string resolve_against(const std::filesystem::path& suite_dir, const std::string& p) {
  const std::filesystem::path path(p);
  if (path.is_absolute() || suite_dir.empty()) return path.lexically_normal().string();
  return (suite_dir / path).lexically_normal().string();
}

Status parse_scenario(const std::string& name, const YAML::Node& node, const std::filesystem::path& dir,
                      const YamlWhere& w, ScenarioSpec* s) {
  const std::string path = "scenarios." + name;
  if (!node.IsMap()) return w.error(node, path, "must be a mapping {eval, max_tokens, stop}");
  LG_RETURN_IF_ERROR(
      yaml_check_keys(node, path, {"eval", "max_tokens", "stop", "adapter", "train", "train_config"}, w));
  // An upgrade's keys: where the online adapter is and what retrains it.
  for (auto [key, out] : {std::pair<const char*, std::string*>{"adapter", &s->adapter_path},
                          {"train", &s->train_path}, {"train_config", &s->train_config_path}}) {
    if (const YAML::Node v = node[key]; v && !v.IsNull()) {
      std::string given;
      LG_RETURN_IF_ERROR(yaml_string(v, path + "." + key, w, &given));
      *out = resolve_against(dir, given);
    }
  }
  s->name = name;
  if (!node["eval"]) return w.error(node, path + ".eval", "missing (the eval JSONL file is required)");
  std::string eval;
  LG_RETURN_IF_ERROR(yaml_string(node["eval"], path + ".eval", w, &eval));
  s->eval_path = resolve_against(dir, eval);
  if (const YAML::Node mt = node["max_tokens"]; mt && !mt.IsNull()) {
    int64_t v = 0;
    bool ok = mt.IsScalar();
    try {
      if (ok) v = mt.as<int64_t>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
    if (!ok || v < 1 || v > 65536) return w.error(mt, path + ".max_tokens", "must be an integer in [1, 65536]");
    s->max_tokens = static_cast<int32_t>(v);
  }
  if (const YAML::Node stop = node["stop"]; stop && !stop.IsNull()) {
    if (!stop.IsSequence() || stop.size() > kMaxStops) {
      return w.error(stop, path + ".stop", "must be a list of at most " + std::to_string(kMaxStops) + " strings");
    }
    for (size_t i = 0; i < stop.size(); ++i) {
      std::string one;
      LG_RETURN_IF_ERROR(yaml_string(stop[i], path + ".stop[" + std::to_string(i) + "]", w, &one));
      s->stop.push_back(std::move(one));
    }
  }
  return Status::ok();
}

Result<Suite> parse_yaml(Suite suite, const YAML::Node& root) {
  const YamlWhere w{suite.path};
  if (!root.IsMap()) return Status::invalid_argument(suite.path + ": must be a mapping with scenarios (and generic)");
  LG_RETURN_IF_ERROR(yaml_check_keys(root, "", {"scenarios", "generic"}, w));
  const std::filesystem::path dir = std::filesystem::path(suite.path).parent_path();

  const YAML::Node scenarios = root["scenarios"];
  if (!scenarios || !scenarios.IsMap() || scenarios.size() == 0) {
    return w.error(scenarios ? scenarios : root, "scenarios", "must map at least one scenario name to {eval: PATH}");
  }
  // Refused before any scenario is looked at: a suite is a comparison of adapters, not a catalogue.
  if (scenarios.size() > kMaxScenarios) {
    return w.error(scenarios, "scenarios",
                   std::to_string(scenarios.size()) + " scenarios, over the limit of " + std::to_string(kMaxScenarios));
  }
  std::set<std::string> seen;
  for (const auto& kv : scenarios) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "";
    // Gates report the base-quality set as "generic", so a scenario may not take the name.
    if (name == "generic") return w.error(kv.first, "scenarios", "'generic' is not a usable scenario name");
    if (!validate_name("scenario name", name, /*allow_slash=*/false).is_ok()) {
      return w.error(kv.first, "scenarios",
                     "a scenario name must be 1 to 256 of [A-Za-z0-9._-], not '.' or '..' (as the registry's)");
    }
    if (!seen.insert(name).second) return w.error(kv.first, "scenarios." + name, "duplicate scenario");
    ScenarioSpec spec;
    LG_RETURN_IF_ERROR(parse_scenario(name, kv.second, dir, w, &spec));
    suite.scenarios.push_back(std::move(spec));
  }

  if (const YAML::Node generic = root["generic"]; generic && !generic.IsNull()) {
    std::string p;
    LG_RETURN_IF_ERROR(yaml_string(generic, "generic", w, &p));
    suite.generic_path = resolve_against(dir, p);
  }
  return suite;
}

}  // namespace

Result<Suite> parse_suite_spec(std::string text, const std::string& path) {
  Suite suite;
  suite.path = path;
  suite.text = std::move(text);
  YAML::Node root;
  try {
    root = YAML::Load(suite.text);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(path + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + yaml_phrase(e.msg));
  }
  try {
    return parse_yaml(std::move(suite), root);
  } catch (const YAML::Exception& e) {  // a node of an unexpected shape: still a bad file, never a crash
    return Status::invalid_argument(path + ":" + std::to_string(e.mark.line + 1) + ": unusable YAML: " + yaml_phrase(e.msg));
  }
}

}  // namespace loragate::eval

// GateConfig: the defaults, reading a gates YAML file (every key checked and
// named in errors) and writing a config back as YAML.
#include "evaluator/gates.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "evaluator/gate_table.h"

namespace loragate::eval {
namespace gates_detail {
namespace {

// --- YAML ----------------------------------------------------------------------

// A mapping at a key path (e.g. "adapter.keyword_rate"), for messages that name the key.
class YamlMap {
 public:
  YamlMap(YAML::Node node, std::string path) : node_(std::move(node)), path_(std::move(path)) {}

  // Absent and null are "given as nothing"; anything else must be a mapping.
  bool absent() const { return !node_.IsDefined(); }
  bool null() const { return node_.IsDefined() && node_.IsNull(); }
  bool has(const std::string& key) const { return !absent() && !null() && node_[key].IsDefined(); }
  bool is_null(const std::string& key) const { return has(key) && node_[key].IsNull(); }

  Status check_keys(const std::vector<std::string>& known) const {
    if (absent() || null()) return Status::ok();
    if (!node_.IsMap()) return Status::invalid_argument(path_ + ": must be a mapping (keys: " + join(known) + ")");
    for (const auto& kv : node_) {
      // A key may itself be a mapping or a sequence ("{a: 1}: x"), which has no string form.
      if (!kv.first.IsScalar()) {
        return Status::invalid_argument((path_.empty() ? "top level" : path_) + ": keys must be names, not '" +
                                        YAML::Dump(kv.first) + "'");
      }
      const std::string key = kv.first.as<std::string>();
      bool found = false;
      for (const std::string& k : known) found = found || k == key;
      if (!found) return Status::invalid_argument(key_path(key) + ": unknown key (known: " + join(known) + ")");
    }
    return Status::ok();
  }

  YamlMap child(const std::string& key) const {
    return YamlMap(absent() || null() ? YAML::Node(YAML::NodeType::Undefined) : node_[key], key_path(key));
  }

  // Reads a number in [min, max] into `out`; absent keeps it, null resets it.
  Status read_rule(const std::string& key, std::optional<double>& out, double min, double max) const {
    const YAML::Node v = absent() || null() ? YAML::Node(YAML::NodeType::Undefined) : node_[key];
    if (!v.IsDefined()) return Status::ok();
    if (v.IsNull()) {
      out.reset();
      return Status::ok();
    }
    double x = 0;
    LG_RETURN_IF_ERROR(as_number(key, v, x));
    if (!(x >= min && x <= max)) {
      return Status::invalid_argument(key_path(key) + ": " + format_number("%g", x) + " is outside [" +
                                      format_number("%g", min) + ", " + format_number("%g", max) + "]");
    }
    out = x;
    return Status::ok();
  }

  template <typename T>
  Status read(const std::string& key, T& out) const {
    const YAML::Node v = absent() || null() ? YAML::Node(YAML::NodeType::Undefined) : node_[key];
    if (!v.IsDefined() || v.IsNull()) return Status::ok();
    try {
      out = v.as<T>();
    } catch (const YAML::Exception&) {
      return Status::invalid_argument(key_path(key) + ": wrong type for value '" + YAML::Dump(v) + "'");
    }
    return Status::ok();
  }

  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  Status as_number(const std::string& key, const YAML::Node& v, double& out) const {
    const Status wrong = Status::invalid_argument(key_path(key) + ": must be a number, not '" + YAML::Dump(v) + "'");
    if (!v.IsScalar()) return wrong;
    try {
      out = v.as<double>();
    } catch (const YAML::Exception&) {
      return wrong;
    }
    return Status::ok();
  }

  YAML::Node node_;
  std::string path_;
};

// The keys a metric takes besides its bound rules.
const std::vector<std::string> kMetricOptions = {"min_items", "optional"};

Status read_min_items(const YamlMap& m, const std::string& key, int64_t& out) {
  LG_RETURN_IF_ERROR(m.read(key, out));
  if (out < 1 || out > 1'000'000'000) {
    return Status::invalid_argument(m.key_path(key) + ": " + std::to_string(out) + " must be at least 1");
  }
  return Status::ok();
}

// One metric's rules. Given as null (or empty), all of them are turned off.
Status parse_metric(const YamlMap& m, const MetricSpec& spec, bool absolute, MetricGate& gate) {
  if (m.null()) {
    gate = MetricGate{};
    return Status::ok();
  }
  const std::vector<std::string> rules = accepted_rules(spec, absolute);
  std::vector<std::string> keys = rules;
  keys.insert(keys.end(), kMetricOptions.begin(), kMetricOptions.end());
  LG_RETURN_IF_ERROR(m.check_keys(keys));
  // Rates live in [0, 1], so can their floors and drops; the rest is only >= 0.
  const double max = spec.format == Format::kRate ? 1.0 : 1e12;
  for (const RuleKey& r : kRules) {
    bool accepted = false;
    for (const std::string& name : rules) accepted = accepted || name == r.name;
    if (accepted) LG_RETURN_IF_ERROR(m.read_rule(r.name, gate.*r.value, 0.0, max));
  }
  if (m.has("min_items")) {
    if (m.is_null("min_items")) {
      gate.min_items.reset();
    } else {
      int64_t n = 0;
      LG_RETURN_IF_ERROR(read_min_items(m, "min_items", n));
      gate.min_items = n;
    }
  }
  LG_RETURN_IF_ERROR(m.read("optional", gate.optional));
  if (gate.min_abs_rise_ms && !gate.max_rise_rel) {
    return Status::invalid_argument(m.key_path("min_abs_rise_ms") +
                                    ": needs max_rise_rel (a rise fails only when it exceeds both)");
  }
  return Status::ok();
}

template <typename Gates, size_t N>
Status parse_section(const YamlMap& s, const MetricKey<Gates> (&metrics)[N], bool absolute, bool adapter,
                     Gates& gates) {
  if (s.null()) {
    gates = Gates{};
    return Status::ok();
  }
  std::vector<std::string> names;
  for (const auto& m : metrics) {
    if (adapter || !m.spec.adapter_only) names.push_back(m.spec.name);
  }
  names.push_back("optional");
  LG_RETURN_IF_ERROR(s.check_keys(names));
  LG_RETURN_IF_ERROR(s.read("optional", gates.optional));
  for (const auto& m : metrics) {
    if (!adapter && m.spec.adapter_only) continue;
    const YamlMap metric = s.child(m.spec.name);
    if (!metric.absent()) LG_RETURN_IF_ERROR(parse_metric(metric, m.spec, absolute, gates.*m.gate));
  }
  return Status::ok();
}

Status parse_bootstrap(const YamlMap& s, BootstrapOptions& o) {
  LG_RETURN_IF_ERROR(s.check_keys({"samples", "level", "seed"}));
  int64_t samples = o.samples;
  LG_RETURN_IF_ERROR(s.read("samples", samples));
  // Fewer than 100 resamples cannot place a 95% interval's ends.
  if (samples < 100 || samples > 1'000'000) {
    return Status::invalid_argument(s.key_path("samples") + ": " + std::to_string(samples) +
                                    " is outside [100, 1000000]");
  }
  o.samples = static_cast<int32_t>(samples);
  LG_RETURN_IF_ERROR(s.read("level", o.level));
  if (!(o.level > 0.0 && o.level < 1.0)) {
    return Status::invalid_argument(s.key_path("level") + ": " + format_number("%g", o.level) +
                                    " must be in (0, 1), e.g. 0.95");
  }
  LG_RETURN_IF_ERROR(s.read("seed", o.seed));
  return Status::ok();
}

// The shortest text strtod reads back as exactly `v`.
std::string exact_number(double v) {
  for (int digits = 15; digits <= 17; ++digits) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return format_number("%.17g", v);
}

template <typename Gates, size_t N>
void write_section(std::ostringstream& out, const char* name, const MetricKey<Gates> (&metrics)[N], bool absolute,
                   bool adapter, const Gates& gates) {
  out << name << ":\n  optional: " << (gates.optional ? "true" : "false") << "\n";
  for (const auto& m : metrics) {
    if (!adapter && m.spec.adapter_only) continue;
    const MetricGate& gate = gates.*m.gate;
    out << "  " << m.spec.name << ": {";
    for (const std::string& rule : accepted_rules(m.spec, absolute)) {
      for (const RuleKey& r : kRules) {
        if (rule != r.name) continue;
        const std::optional<double>& v = gate.*r.value;
        out << r.name << ": " << (v ? exact_number(*v) : "null") << ", ";
      }
    }
    out << "min_items: " << (gate.min_items ? std::to_string(*gate.min_items) : "null")
        << ", optional: " << (gate.optional ? "true" : "false") << "}\n";
  }
}

}  // namespace
}  // namespace gates_detail

// --- config ----------------------------------------------------------------------------

// Keep in step with configs/gates.yaml, which says why each value is what it is.
GateConfig GateConfig::defaults() {
  GateConfig c;
  c.min_items = 30;
  c.nll_unit = NllUnit::kAuto;

  c.adapter.keyword_rate.floor = 0.80;
  c.adapter.keyword_rate.max_drop = 0.10;
  c.adapter.exact_match_rate.max_drop = 0.15;
  c.adapter.rougeL_f1.max_drop = 0.05;
  c.adapter.token_f1.max_drop = 0.05;
  c.adapter.nll_mean.max_rise = 0.05;
  c.adapter.negative_flip_rate.max_rate = 0.03;

  c.recorded.optional = true;
  c.recorded.keyword_rate.max_drop = 0.10;
  c.recorded.exact_match_rate.max_drop = 0.15;
  c.recorded.rougeL_f1.max_drop = 0.05;
  c.recorded.token_f1.max_drop = 0.05;
  c.recorded.nll_mean.max_rise = 0.05;

  c.no_adapter.keyword_rate.max_drop = 0.15;
  c.no_adapter.perplexity.max_rise_rel = 0.10;

  c.generic.perplexity.max_rise_rel = 0.10;

  c.latency.optional = true;
  c.latency.ttft_p90.max_rise_rel = 0.50;
  c.latency.ttft_p90.min_abs_rise_ms = 0.5;
  c.latency.tpot_p90.max_rise_rel = 0.50;
  c.latency.tpot_p90.min_abs_rise_ms = 0.5;

  c.bootstrap.samples = 2000;
  c.bootstrap.level = 0.95;
  c.bootstrap.seed = 1;
  return c;
}

Result<GateConfig> GateConfig::parse(const std::string& yaml, const std::string& source) {
  return parse(yaml, source, defaults());
}

Result<GateConfig> GateConfig::parse(const std::string& yaml, const std::string& source, const GateConfig& base) {
  using namespace gates_detail;
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(source + ": invalid YAML: " + e.what());
  }
  GateConfig c = base;
  if (root.IsNull()) return c;
  auto in_file = [&](Status s) { return s.with_context(source); };
  const YamlMap top(root, "");
  if (!root.IsMap()) return Status::invalid_argument(source + ": the gates file must be a mapping");
  if (top.has("latency_floor_ms")) {
    return Status::invalid_argument(source + ": latency_floor_ms: removed (it hid regressions under it); latency "
                                    "gates take min_abs_rise_ms beside max_rise_rel instead");
  }
  LG_RETURN_IF_ERROR(in_file(top.check_keys(
      {"bootstrap", "min_items", "nll_unit", "adapter", "recorded", "no_adapter", "generic", "latency"})));
  LG_RETURN_IF_ERROR(in_file(parse_bootstrap(top.child("bootstrap"), c.bootstrap)));
  if (top.has("min_items")) LG_RETURN_IF_ERROR(in_file(read_min_items(top, "min_items", c.min_items)));
  std::string unit = c.nll_unit == NllUnit::kByte ? "byte" : "auto";
  LG_RETURN_IF_ERROR(in_file(top.read("nll_unit", unit)));
  if (unit != "auto" && unit != "byte") {
    return Status::invalid_argument(source + ": nll_unit: \"" + unit + "\" is neither auto nor byte");
  }
  c.nll_unit = unit == "byte" ? NllUnit::kByte : NllUnit::kAuto;
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("adapter"), kScenarioMetrics, true, true, c.adapter)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("recorded"), kScenarioMetrics, false, false, c.recorded)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("no_adapter"), kScenarioMetrics, true, false, c.no_adapter)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("generic"), kGenericMetrics, true, false, c.generic)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("latency"), kLatencyMetrics, true, false, c.latency)));
  return c;
}

Result<GateConfig> GateConfig::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found("cannot read gates file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

std::string GateConfig::to_yaml() const {
  using namespace gates_detail;
  std::ostringstream out;
  out << "# loragate gates, every rule stated (configs/gates.yaml explains the defaults)\n";
  out << "bootstrap:\n  samples: " << bootstrap.samples << "\n  level: " << exact_number(bootstrap.level)
      << "\n  seed: " << bootstrap.seed << "\n";
  out << "min_items: " << min_items << "\n";
  out << "nll_unit: " << (nll_unit == NllUnit::kByte ? "byte" : "auto") << "\n";
  write_section(out, "adapter", kScenarioMetrics, true, true, adapter);
  write_section(out, "recorded", kScenarioMetrics, false, false, recorded);
  write_section(out, "no_adapter", kScenarioMetrics, true, false, no_adapter);
  write_section(out, "generic", kGenericMetrics, true, false, generic);
  write_section(out, "latency", kLatencyMetrics, true, false, latency);
  return out.str();
}

std::string GateConfig::defaults_text() { return defaults().to_yaml(); }

}  // namespace loragate::eval

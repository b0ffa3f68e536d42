// GateConfig: the defaults, reading a gates YAML file (every key checked and
// named in errors) and writing a config back as YAML.
#include "evaluator/gates.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "evaluator/gate_metrics.h"

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

  Status check_keys(const std::vector<std::string>& known) const {
    if (absent() || null()) return Status::ok();
    if (!node_.IsMap()) return Status::invalid_argument(path_ + ": must be a mapping (keys: " + join(known) + ")");
    for (const auto& kv : node_) {
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

// One metric's rules. Given as null (or empty), all of them are turned off.
Status parse_metric(const YamlMap& m, bool higher_better, Format format, bool absolute, MetricGate& gate) {
  if (m.null()) {
    gate = MetricGate{};
    return Status::ok();
  }
  const std::vector<std::string> rules = accepted_rules(higher_better, absolute);
  LG_RETURN_IF_ERROR(m.check_keys(rules));
  // Rates live in [0, 1], so can their floors and drops; the rest is only >= 0.
  const double max = format == Format::kRate ? 1.0 : 1e12;
  for (const RuleKey& r : kRules) {
    bool accepted = false;
    for (const std::string& name : rules) accepted = accepted || name == r.name;
    if (accepted) LG_RETURN_IF_ERROR(m.read_rule(r.name, gate.*r.value, 0.0, max));
  }
  return Status::ok();
}

template <typename Gates, size_t N>
Status parse_section(const YamlMap& s, const MetricKey<Gates> (&metrics)[N], bool absolute, Gates& gates) {
  if (s.null()) {
    gates = Gates{};
    return Status::ok();
  }
  std::vector<std::string> names;
  for (const auto& m : metrics) names.push_back(m.name);
  LG_RETURN_IF_ERROR(s.check_keys(names));
  for (const auto& m : metrics) {
    const YamlMap metric = s.child(m.name);
    if (!metric.absent()) LG_RETURN_IF_ERROR(parse_metric(metric, m.higher_better, m.format, absolute, gates.*m.gate));
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
                   const Gates& gates) {
  out << name << ":\n";
  for (const auto& m : metrics) {
    out << "  " << m.name << ": {";
    const std::vector<std::string> rules = accepted_rules(m.higher_better, absolute);
    for (size_t i = 0; i < rules.size(); ++i) {
      for (const RuleKey& r : kRules) {
        if (rules[i] != r.name) continue;
        const std::optional<double>& v = gates.*m.gate.*r.value;
        out << (i == 0 ? "" : ", ") << r.name << ": " << (v ? exact_number(*v) : "null");
      }
    }
    out << "}\n";
  }
}

}  // namespace
}  // namespace gates_detail

// --- config ----------------------------------------------------------------------------

// Keep in step with configs/gates.yaml, which says why each value is what it is.
GateConfig GateConfig::defaults() {
  GateConfig c;
  c.adapter.keyword_rate.floor = 0.80;
  c.adapter.keyword_rate.max_drop = 0.10;
  c.adapter.exact_match_rate.max_drop = 0.15;
  c.adapter.rougeL_f1.max_drop = 0.05;
  c.adapter.token_f1.max_drop = 0.05;
  c.adapter.nll_mean.max_rise = 0.05;

  c.recorded.keyword_rate.max_drop = 0.10;
  c.recorded.exact_match_rate.max_drop = 0.15;
  c.recorded.rougeL_f1.max_drop = 0.05;
  c.recorded.token_f1.max_drop = 0.05;
  c.recorded.nll_mean.max_rise = 0.05;

  c.no_adapter.keyword_rate.max_drop = 0.10;
  c.no_adapter.perplexity.max_rise_rel = 0.10;

  c.generic.perplexity.max_rise_rel = 0.10;

  c.latency.ttft_p99.max_rise_rel = 0.50;
  c.latency.tpot_p50.max_rise_rel = 0.25;

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
  LG_RETURN_IF_ERROR(
      in_file(top.check_keys({"bootstrap", "latency_floor_ms", "adapter", "recorded", "no_adapter", "generic", "latency"})));
  LG_RETURN_IF_ERROR(in_file(parse_bootstrap(top.child("bootstrap"), c.bootstrap)));
  LG_RETURN_IF_ERROR(in_file(top.read("latency_floor_ms", c.latency_floor_ms)));
  if (!(c.latency_floor_ms >= 0 && c.latency_floor_ms < 1e6)) {
    return Status::invalid_argument(source + ": latency_floor_ms must be >= 0 (milliseconds)");
  }
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("adapter"), kScenarioMetrics, true, c.adapter)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("recorded"), kScenarioMetrics, false, c.recorded)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("no_adapter"), kScenarioMetrics, true, c.no_adapter)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("generic"), kGenericMetrics, true, c.generic)));
  LG_RETURN_IF_ERROR(in_file(parse_section(top.child("latency"), kLatencyMetrics, true, c.latency)));
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
  out << "latency_floor_ms: " << exact_number(latency_floor_ms) << "\n";
  write_section(out, "adapter", kScenarioMetrics, true, adapter);
  write_section(out, "recorded", kScenarioMetrics, false, recorded);
  write_section(out, "no_adapter", kScenarioMetrics, true, no_adapter);
  write_section(out, "generic", kGenericMetrics, true, generic);
  write_section(out, "latency", kLatencyMetrics, true, latency);
  return out.str();
}

std::string GateConfig::defaults_text() { return defaults().to_yaml(); }

}  // namespace loragate::eval

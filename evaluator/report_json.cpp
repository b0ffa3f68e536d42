// report_json and its inverse run_from_json: a RunResult as JSON and back.
// Writing is a plain mapping of fields; reading goes through a small Reader
// that keeps the first error with the path of the key that caused it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "evaluator/report.h"

namespace loragate::eval {
namespace {

using nlohmann::json;

// JSON has no NaN or infinity (nlohmann would write both as null).
json number(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json metrics_json(const ArmMetrics& m) {
  return {
      {"n_items", m.n_items},
      {"keyword_rate", number(m.keyword_rate)},
      {"exact_match_rate", number(m.exact_match_rate)},
      {"rougeL_f1", number(m.rougeL_f1)},
      {"token_f1", number(m.token_f1)},
      {"nll_mean", number(m.nll_mean)},
      {"perplexity", number(m.perplexity)},
      {"n_ref_tokens", m.n_ref_tokens},
      {"agreement", number(m.agreement)},
      {"negative_flips", m.negative_flips},
      {"ttft_p50_ms", number(m.ttft_p50_ms)},
      {"ttft_p99_ms", number(m.ttft_p99_ms)},
      {"tpot_p50_ms", number(m.tpot_p50_ms)},
      {"tpot_p99_ms", number(m.tpot_p99_ms)},
  };
}

json item_json(const ItemResult& it) {
  return {
      {"id", it.id},
      {"generated_ids", it.generated_ids},
      {"continuation_text", it.continuation_text},
      {"compared_text", it.compared_text},
      {"keyword", it.keyword},
      {"exact_match", it.exact_match},
      {"rougeL_f1", number(it.rougeL_f1)},
      {"token_f1", number(it.token_f1)},
      {"nll_sum", number(it.nll_sum)},
      {"n_ref_tokens", it.n_ref_tokens},
      {"ttft_ms", number(it.ttft_ms)},
      {"tpot_ms", number(it.tpot_ms)},
      {"unfinished", it.unfinished},
      {"unscored", it.unscored},
      {"reference_bytes", it.reference_bytes},
      {"order", it.order},
  };
}

json arm_json(const ArmResult& arm) {
  json items = json::array();
  for (const ItemResult& it : arm.items) items.push_back(item_json(it));
  return {
      {"base", arm.base},
      {"base_sha256", arm.base_sha256},
      {"adapter", arm.adapter},
      {"adapter_sha256", arm.adapter_sha256},
      {"metrics", metrics_json(arm.metrics)},
      {"items", std::move(items)},
  };
}

json generic_json(const GenericResult& g) {
  json rows = json::array();
  for (size_t i = 0; i < g.row_nll_sum.size() || i < g.row_tokens.size(); ++i) {
    rows.push_back({{"nll_sum", number(i < g.row_nll_sum.size() ? g.row_nll_sum[i] : 0.0)},
                    {"n_tokens", i < g.row_tokens.size() ? g.row_tokens[i] : 0},
                    {"n_bytes", i < g.row_bytes.size() ? g.row_bytes[i] : 0}});
  }
  return {{"nll_mean", number(g.nll_mean)}, {"perplexity", number(g.perplexity)}, {"rows", std::move(rows)}};
}

json gate_json(const GateResult& g) {
  return {
      {"scenario", g.scenario},
      {"metric", g.metric},
      {"against", g.against},
      {"rule", g.rule},
      {"verdict", verdict_name(g.verdict)},
      {"estimate", number(g.estimate)},
      {"low", number(g.low)},
      {"high", number(g.high)},
      {"margin", number(g.margin)},
      {"why", g.why},
      {"method", g.method},
      {"unit", g.unit},
      {"n", g.n},
      {"optional", g.optional},
  };
}

bool parse_verdict(const std::string& s, Verdict* out) {
  for (Verdict v : {Verdict::kPass, Verdict::kFail, Verdict::kInconclusive, Verdict::kSkipped}) {
    if (s == verdict_name(v)) {
      *out = v;
      return true;
    }
  }
  return false;
}

// Reads fields that are present, leaving absent ones at their defaults, and
// remembers the first key whose value has the wrong type.
class Reader {
 public:
  static std::string path(const std::string& where, const std::string& key) {
    return where.empty() ? key : where + "." + key;
  }

  void fail(const std::string& at, const std::string& what) {
    if (error_.empty()) error_ = at + ": " + what;
  }
  bool ok() const { return error_.empty(); }
  Status status() const { return ok() ? Status::ok() : Status::corrupt("evaluation run JSON: " + error_); }

  // The value of obj[key], or null when the key is absent (or obj is no object).
  static const json* find(const json& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  void get(const json& obj, const char* key, const std::string& where, std::string* out) {
    const json* v = find(obj, key);
    if (!v) return;
    if (!v->is_string()) return fail(path(where, key), "expected a string");
    *out = v->get<std::string>();
  }

  void get(const json& obj, const char* key, const std::string& where, double* out) {
    const json* v = find(obj, key);
    if (v) *out = to_double(*v, path(where, key));
  }

  void get(const json& obj, const char* key, const std::string& where, int64_t* out) {
    const json* v = find(obj, key);
    if (!v) return;
    if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)))
      return fail(path(where, key), "expected an integer");
    *out = v->get<int64_t>();
  }

  void get(const json& obj, const char* key, const std::string& where, uint64_t* out) {
    const json* v = find(obj, key);
    if (!v) return;
    if (!v->is_number_unsigned()) return fail(path(where, key), "expected an unsigned integer");
    *out = v->get<uint64_t>();
  }

  void get(const json& obj, const char* key, const std::string& where, int32_t* out) {
    int64_t wide = *out;
    get(obj, key, where, &wide);
    if (wide < INT32_MIN || wide > INT32_MAX) return fail(path(where, key), "out of the int32 range");
    *out = static_cast<int32_t>(wide);
  }

  void get(const json& obj, const char* key, const std::string& where, std::vector<int32_t>* out) {
    const json* v = array(obj, key, where);
    if (!v) return;
    out->clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      const std::string at = path(where, key) + "[" + std::to_string(i) + "]";
      if (!e.is_number_integer()) return fail(at, "expected an integer");
      const int64_t x = e.get<int64_t>();
      if (x < INT32_MIN || x > INT32_MAX) return fail(at, "out of the int32 range");
      out->push_back(static_cast<int32_t>(x));
    }
  }

  void get(const json& obj, const char* key, const std::string& where, bool* out) {
    const json* v = find(obj, key);
    if (!v) return;
    if (!v->is_boolean()) return fail(path(where, key), "expected true or false");
    *out = v->get<bool>();
  }

  void get(const json& obj, const char* key, const std::string& where, Verdict* out) {
    std::string s;
    if (!find(obj, key)) return;
    get(obj, key, where, &s);
    if (ok() && !parse_verdict(s, out)) fail(path(where, key), "unknown verdict \"" + s + "\"");
  }

  // A number, null (NaN) or "inf" / "-inf" / "nan".
  double to_double(const json& v, const std::string& at) {
    if (v.is_number()) return v.get<double>();
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    fail(at, "expected a number");
    return 0;
  }

  const json* object(const json& obj, const char* key, const std::string& where) {
    const json* v = find(obj, key);
    if (v && !v->is_object()) {
      fail(path(where, key), "expected an object");
      return nullptr;
    }
    return v;
  }

  const json* array(const json& obj, const char* key, const std::string& where) {
    const json* v = find(obj, key);
    if (v && !v->is_array()) {
      fail(path(where, key), "expected an array");
      return nullptr;
    }
    return v;
  }

 private:
  std::string error_;
};

ArmMetrics read_metrics(Reader& r, const json& j, const std::string& at) {
  ArmMetrics m;
  r.get(j, "n_items", at, &m.n_items);
  r.get(j, "keyword_rate", at, &m.keyword_rate);
  r.get(j, "exact_match_rate", at, &m.exact_match_rate);
  r.get(j, "rougeL_f1", at, &m.rougeL_f1);
  r.get(j, "token_f1", at, &m.token_f1);
  r.get(j, "nll_mean", at, &m.nll_mean);
  r.get(j, "perplexity", at, &m.perplexity);
  r.get(j, "n_ref_tokens", at, &m.n_ref_tokens);
  r.get(j, "agreement", at, &m.agreement);
  r.get(j, "negative_flips", at, &m.negative_flips);
  r.get(j, "ttft_p50_ms", at, &m.ttft_p50_ms);
  r.get(j, "ttft_p99_ms", at, &m.ttft_p99_ms);
  r.get(j, "tpot_p50_ms", at, &m.tpot_p50_ms);
  r.get(j, "tpot_p99_ms", at, &m.tpot_p99_ms);
  return m;
}

ItemResult read_item(Reader& r, const json& j, const std::string& at) {
  ItemResult it;
  if (!j.is_object()) {
    r.fail(at, "expected an object");
    return it;
  }
  r.get(j, "id", at, &it.id);
  r.get(j, "generated_ids", at, &it.generated_ids);
  r.get(j, "continuation_text", at, &it.continuation_text);
  r.get(j, "compared_text", at, &it.compared_text);
  r.get(j, "keyword", at, &it.keyword);
  r.get(j, "exact_match", at, &it.exact_match);
  r.get(j, "rougeL_f1", at, &it.rougeL_f1);
  r.get(j, "token_f1", at, &it.token_f1);
  r.get(j, "nll_sum", at, &it.nll_sum);
  r.get(j, "n_ref_tokens", at, &it.n_ref_tokens);
  r.get(j, "ttft_ms", at, &it.ttft_ms);
  r.get(j, "tpot_ms", at, &it.tpot_ms);
  r.get(j, "unfinished", at, &it.unfinished);
  r.get(j, "unscored", at, &it.unscored);
  r.get(j, "reference_bytes", at, &it.reference_bytes);
  r.get(j, "order", at, &it.order);
  return it;
}

ArmResult read_arm(Reader& r, const std::string& name, const json& j, const std::string& at) {
  ArmResult arm;
  arm.arm = name;
  if (!j.is_object()) {
    r.fail(at, "expected an object");
    return arm;
  }
  r.get(j, "base", at, &arm.base);
  r.get(j, "base_sha256", at, &arm.base_sha256);
  r.get(j, "adapter", at, &arm.adapter);
  r.get(j, "adapter_sha256", at, &arm.adapter_sha256);
  if (const json* m = r.object(j, "metrics", at)) arm.metrics = read_metrics(r, *m, Reader::path(at, "metrics"));
  if (const json* items = r.array(j, "items", at)) {
    for (size_t i = 0; i < items->size() && r.ok(); ++i)
      arm.items.push_back(read_item(r, (*items)[i], Reader::path(at, "items") + "[" + std::to_string(i) + "]"));
  }
  return arm;
}

GenericResult read_generic(Reader& r, const std::string& name, const json& j, const std::string& at) {
  GenericResult g;
  g.arm = name;
  if (!j.is_object()) {
    r.fail(at, "expected an object");
    return g;
  }
  r.get(j, "nll_mean", at, &g.nll_mean);
  r.get(j, "perplexity", at, &g.perplexity);
  if (const json* rows = r.array(j, "rows", at)) {
    for (size_t i = 0; i < rows->size() && r.ok(); ++i) {
      const std::string row_at = Reader::path(at, "rows") + "[" + std::to_string(i) + "]";
      double nll = 0;
      int64_t tokens = 0, bytes = 0;
      if (!(*rows)[i].is_object()) r.fail(row_at, "expected an object");
      r.get((*rows)[i], "nll_sum", row_at, &nll);
      r.get((*rows)[i], "n_tokens", row_at, &tokens);
      r.get((*rows)[i], "n_bytes", row_at, &bytes);
      g.row_nll_sum.push_back(nll);
      g.row_tokens.push_back(tokens);
      g.row_bytes.push_back(bytes);
    }
  }
  return g;
}

GateResult read_gate(Reader& r, const json& j, const std::string& at) {
  GateResult g;
  if (!j.is_object()) {
    r.fail(at, "expected an object");
    return g;
  }
  r.get(j, "scenario", at, &g.scenario);
  r.get(j, "metric", at, &g.metric);
  r.get(j, "against", at, &g.against);
  r.get(j, "rule", at, &g.rule);
  r.get(j, "verdict", at, &g.verdict);
  r.get(j, "estimate", at, &g.estimate);
  r.get(j, "low", at, &g.low);
  r.get(j, "high", at, &g.high);
  r.get(j, "margin", at, &g.margin);
  r.get(j, "why", at, &g.why);
  r.get(j, "method", at, &g.method);
  r.get(j, "unit", at, &g.unit);
  r.get(j, "n", at, &g.n);
  r.get(j, "optional", at, &g.optional);
  return g;
}

// Scenarios are an object keyed by name (so machines can address them);
// scenario_order keeps the suite's order. Names missing from the order (a
// hand-edited file) follow in the object's order.
void read_scenarios(Reader& r, const json& j, RunResult* run) {
  const json* scenarios = r.object(j, "scenarios", "");
  if (!scenarios) return;
  std::vector<std::string> order;
  if (const json* listed = r.array(j, "scenario_order", "")) {
    for (size_t i = 0; i < listed->size(); ++i) {
      const json& name = (*listed)[i];
      if (!name.is_string()) return r.fail("scenario_order[" + std::to_string(i) + "]", "expected a string");
      if (std::find(order.begin(), order.end(), name.get<std::string>()) != order.end())
        return r.fail("scenario_order[" + std::to_string(i) + "]",
                      "\"" + name.get<std::string>() + "\" is listed twice");
      if (!scenarios->contains(name.get<std::string>()))
        return r.fail("scenario_order[" + std::to_string(i) + "]",
                      "\"" + name.get<std::string>() + "\" is not in scenarios");
      order.push_back(name.get<std::string>());
    }
  }
  for (const auto& [name, value] : scenarios->items()) {
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
  }
  for (const std::string& name : order) {
    const json& sj = scenarios->at(name);
    const std::string at = "scenarios." + name;
    if (!sj.is_object()) return r.fail(at, "expected an object");
    ScenarioResult s;
    s.name = name;
    for (const auto& [arm, aj] : sj.items()) s.arms[arm] = read_arm(r, arm, aj, at + "." + arm);
    run->scenarios.push_back(std::move(s));
  }
}

// generic is keyed by arm; the RunResult lists online, then candidate, then
// any other arm by name.
void read_generic_all(Reader& r, const json& j, RunResult* run) {
  const json* generic = r.object(j, "generic", "");
  if (!generic) return;
  std::vector<std::string> order;
  for (const char* first : {"online", "candidate"})
    if (generic->contains(first)) order.push_back(first);
  for (const auto& [name, value] : generic->items())
    if (name != "online" && name != "candidate") order.push_back(name);
  for (const std::string& name : order)
    run->generic.push_back(read_generic(r, name, generic->at(name), "generic." + name));
}

}  // namespace

nlohmann::json report_json(const RunResult& run) {
  json gates = json::array();
  for (const GateResult& g : run.gates) gates.push_back(gate_json(g));
  json order = json::array();
  json scenarios = json::object();
  for (const ScenarioResult& s : run.scenarios) {
    order.push_back(s.name);
    json arms = json::object();
    for (const auto& [name, arm] : s.arms) arms[name] = arm_json(arm);
    scenarios[s.name] = std::move(arms);
  }
  json generic = json::object();
  for (const GenericResult& g : run.generic) generic[g.arm] = generic_json(g);
  return {
      {"format", kRunJsonFormat},
      {"id", run.id},
      {"started_at", run.started_at},
      {"online_base", run.online_base},
      {"online_sha256", run.online_sha256},
      {"candidate_base", run.candidate_base},
      {"candidate_sha256", run.candidate_sha256},
      {"suite_path", run.suite_path},
      {"suite_sha256", run.suite_sha256},
      {"suite_text", run.suite_text},
      {"gates_sha256", run.gates_sha256},
      {"gates_text", run.gates_text},
      {"seed", run.seed},
      {"verdict", verdict_name(run.verdict)},
      {"recorded_run_id", run.recorded_run_id},
      {"recorded_arm", run.recorded_arm},
      {"online_tokenizer_sha256", run.online_tokenizer_sha256},
      {"candidate_tokenizer_sha256", run.candidate_tokenizer_sha256},
      {"latency_biased", run.latency_biased},
      {"gates", std::move(gates)},
      {"scenario_order", std::move(order)},
      {"scenarios", std::move(scenarios)},
      {"generic", std::move(generic)},
  };
}

Result<RunResult> run_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Status::corrupt("evaluation run JSON: expected an object");
  const json* format = Reader::find(j, "format");
  if (!format || !format->is_string() || format->get<std::string>() != kRunJsonFormat) {
    return Status::corrupt(std::string("evaluation run JSON: format: expected \"") + kRunJsonFormat + "\", got " +
                           (format ? format->dump() : "nothing"));
  }
  Reader r;
  RunResult run;
  r.get(j, "id", "", &run.id);
  r.get(j, "started_at", "", &run.started_at);
  r.get(j, "online_base", "", &run.online_base);
  r.get(j, "online_sha256", "", &run.online_sha256);
  r.get(j, "candidate_base", "", &run.candidate_base);
  r.get(j, "candidate_sha256", "", &run.candidate_sha256);
  r.get(j, "suite_path", "", &run.suite_path);
  r.get(j, "suite_sha256", "", &run.suite_sha256);
  r.get(j, "suite_text", "", &run.suite_text);
  r.get(j, "gates_sha256", "", &run.gates_sha256);
  r.get(j, "gates_text", "", &run.gates_text);
  r.get(j, "seed", "", &run.seed);
  r.get(j, "verdict", "", &run.verdict);
  r.get(j, "recorded_run_id", "", &run.recorded_run_id);
  r.get(j, "recorded_arm", "", &run.recorded_arm);
  r.get(j, "online_tokenizer_sha256", "", &run.online_tokenizer_sha256);
  r.get(j, "candidate_tokenizer_sha256", "", &run.candidate_tokenizer_sha256);
  r.get(j, "latency_biased", "", &run.latency_biased);
  if (const json* gates = r.array(j, "gates", "")) {
    for (size_t i = 0; i < gates->size() && r.ok(); ++i)
      run.gates.push_back(read_gate(r, (*gates)[i], "gates[" + std::to_string(i) + "]"));
  }
  if (r.ok()) read_scenarios(r, j, &run);
  if (r.ok()) read_generic_all(r, j, &run);
  if (!r.ok()) return r.status();
  return run;
}

}  // namespace loragate::eval

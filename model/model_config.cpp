// ModelConfig: Hugging Face config.json (+ generation_config.json) parsing,
// validation and serialisation.
#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

namespace loragate {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

struct ArchInfo {
  const char* architecture;
  const char* model_type;
};
constexpr ArchInfo kArchs[] = {
    {"LlamaForCausalLM", "llama"},
    {"MistralForCausalLM", "mistral"},
    {"Qwen2ForCausalLM", "qwen2"},
};
constexpr const char* kSupportedArchs = "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM";

// A short description of a JSON value for messages (never recurses into containers).
std::string describe(const json& j) {
  if (j.is_primitive()) {
    std::string s = std::string(j.type_name()) + " " + j.dump();
    if (s.size() > 80) s = s.substr(0, 77) + "...";
    return s;
  }
  return j.type_name();
}

// Reads JSON fields of one object, producing Statuses that name the file and key.
class Reader {
 public:
  Reader(const json& obj, std::string source) : obj_(obj), source_(std::move(source)) {}

  const json* get(const std::string& key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const std::string& key) const { return get(key) != nullptr; }

  Status bad_type(const std::string& key, const char* want, const json& got) const {
    return Status::invalid_argument(source_ + ": key '" + key + "' must be " + want + ", got " +
                                    describe(got));
  }
  Status invalid(const std::string& key, const std::string& why) const {
    return Status::invalid_argument(source_ + ": key '" + key + "' " + why);
  }

  // Integer keys: JSON integers only (64.0 or "64" are refused).
  Status int_value(const json& j, const std::string& key, int64_t* out) const {
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
  Status opt_int(const std::string& key, int64_t* out) const {
    const json* j = get(key);
    return j ? int_value(*j, key, out) : Status::ok();
  }
  Status req_int(const std::string& key, int64_t* out) const {
    const json* j = get(key);
    if (!j) return Status::invalid_argument(source_ + ": missing required key '" + key + "'");
    return int_value(*j, key, out);
  }
  Status opt_double(const std::string& key, double* out) const {
    const json* j = get(key);
    if (!j) return Status::ok();
    if (!j->is_number()) return bad_type(key, "a number", *j);
    *out = j->get<double>();
    return Status::ok();
  }
  Status opt_bool(const std::string& key, bool* out) const {
    const json* j = get(key);
    if (!j) return Status::ok();
    if (!j->is_boolean()) return bad_type(key, "a boolean", *j);
    *out = j->get<bool>();
    return Status::ok();
  }
  Status opt_string(const std::string& key, std::string* out) const {
    const json* j = get(key);
    if (!j) return Status::ok();
    if (!j->is_string()) return bad_type(key, "a string", *j);
    *out = j->get<std::string>();
    return Status::ok();
  }
  // A token id or a list of them (eos_token_id).
  Status opt_ids(const std::string& key, std::vector<int32_t>* out) const {
    const json* j = get(key);
    if (!j) return Status::ok();
    auto one = [&](const json& v) -> Status {
      int64_t id = 0;
      LG_RETURN_IF_ERROR(int_value(v, key, &id));
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
        return invalid(key, "holds an invalid token id " + std::to_string(id));
      }
      if (std::find(out->begin(), out->end(), static_cast<int32_t>(id)) == out->end()) {
        out->push_back(static_cast<int32_t>(id));
      }
      return Status::ok();
    };
    if (j->is_array()) {
      for (const json& v : *j) LG_RETURN_IF_ERROR(one(v));
      return Status::ok();
    }
    if (!j->is_number_integer() && !j->is_number_unsigned()) {
      return bad_type(key, "an integer or a list of integers", *j);
    }
    return one(*j);
  }
  Status opt_id(const std::string& key, int32_t* out) const {
    const json* j = get(key);
    if (!j) return Status::ok();
    int64_t id = 0;
    LG_RETURN_IF_ERROR(int_value(*j, key, &id));
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return invalid(key, "holds an invalid token id " + std::to_string(id));
    }
    *out = static_cast<int32_t>(id);
    return Status::ok();
  }

  const std::string& source() const { return source_; }

 private:
  const json& obj_;
  std::string source_;
};

Status read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::io_error(path + ": read failed");
  *out = ss.str();
  return Status::ok();
}

Result<json> parse_object(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return Status::corrupt(source + ": invalid JSON: " + e.what());
  }
  if (!j.is_object()) return Status::corrupt(source + ": top level is not a JSON object");
  return j;
}

Status parse_rope_scaling(const Reader& r, RopeScaling* out) {
  const json* rs = r.get("rope_scaling");
  if (!rs) return Status::ok();
  if (!rs->is_object()) return r.bad_type("rope_scaling", "null or an object", *rs);
  Reader s(*rs, r.source() + ": rope_scaling");
  std::string type;
  LG_RETURN_IF_ERROR(s.opt_string("rope_type", &type));
  if (type.empty()) LG_RETURN_IF_ERROR(s.opt_string("type", &type));
  if (type.empty()) return r.invalid("rope_scaling", "has neither 'rope_type' nor 'type'");
  RopeScaling rope;
  if (type == "default") {
    *out = rope;
    return Status::ok();
  }
  if (type == "linear") {
    rope.type = RopeScalingType::kLinear;
  } else if (type == "llama3") {
    rope.type = RopeScalingType::kLlama3;
  } else {
    return Status::unsupported(r.source() + ": rope_scaling type '" + type +
                               "' is not supported (supported: linear, llama3, default)");
  }
  if (!s.has("factor")) return r.invalid("rope_scaling.factor", "is required for type " + type);
  LG_RETURN_IF_ERROR(s.opt_double("factor", &rope.factor));
  if (!(rope.factor > 0) || !std::isfinite(rope.factor)) {
    return r.invalid("rope_scaling.factor", "must be > 0");
  }
  if (rope.type == RopeScalingType::kLlama3) {
    LG_RETURN_IF_ERROR(s.opt_double("low_freq_factor", &rope.low_freq_factor));
    LG_RETURN_IF_ERROR(s.opt_double("high_freq_factor", &rope.high_freq_factor));
    LG_RETURN_IF_ERROR(
        s.opt_int("original_max_position_embeddings", &rope.original_max_position_embeddings));
    if (!(rope.low_freq_factor > 0)) return r.invalid("rope_scaling.low_freq_factor", "must be > 0");
    if (!(rope.high_freq_factor > rope.low_freq_factor)) {
      return r.invalid("rope_scaling.high_freq_factor", "must exceed low_freq_factor");
    }
    if (rope.original_max_position_embeddings <= 0) {
      return r.invalid("rope_scaling.original_max_position_embeddings", "must be > 0");
    }
  }
  *out = rope;
  return Status::ok();
}

Status validate(const ModelConfig& c, const Reader& r) {
  auto positive = [&](const char* key, int64_t v) -> Status {
    if (v <= 0) return r.invalid(key, "must be > 0, got " + std::to_string(v));
    return Status::ok();
  };
  LG_RETURN_IF_ERROR(positive("hidden_size", c.hidden_size));
  LG_RETURN_IF_ERROR(positive("intermediate_size", c.intermediate_size));
  LG_RETURN_IF_ERROR(positive("num_hidden_layers", c.num_hidden_layers));
  LG_RETURN_IF_ERROR(positive("num_attention_heads", c.num_attention_heads));
  LG_RETURN_IF_ERROR(positive("num_key_value_heads", c.num_key_value_heads));
  LG_RETURN_IF_ERROR(positive("head_dim", c.head_dim));
  LG_RETURN_IF_ERROR(positive("vocab_size", c.vocab_size));
  LG_RETURN_IF_ERROR(positive("max_position_embeddings", c.max_position_embeddings));
  constexpr int64_t kLimit = int64_t{1} << 24;  // far beyond any real model, keeps products small
  for (auto [key, v] : {std::pair<const char*, int64_t>{"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"head_dim", c.head_dim},
                        {"vocab_size", c.vocab_size}}) {
    if (v > kLimit) return r.invalid(key, "is implausibly large: " + std::to_string(v));
  }
  if (c.max_position_embeddings > (int64_t{1} << 32)) {
    return r.invalid("max_position_embeddings", "is implausibly large");
  }
  if (c.num_key_value_heads > c.num_attention_heads ||
      c.num_attention_heads % c.num_key_value_heads != 0) {
    return r.invalid("num_key_value_heads",
                     "(" + std::to_string(c.num_key_value_heads) +
                         ") must divide num_attention_heads (" +
                         std::to_string(c.num_attention_heads) + ")");
  }
  if (c.head_dim % 2 != 0) {
    return r.invalid("head_dim", "must be even for rotary embeddings, got " +
                                     std::to_string(c.head_dim));
  }
  if (c.head_dim * c.num_attention_heads > 4 * c.hidden_size) {
    return r.invalid("head_dim", "(" + std::to_string(c.head_dim) + ") × num_attention_heads (" +
                                     std::to_string(c.num_attention_heads) +
                                     ") is implausible for hidden_size " +
                                     std::to_string(c.hidden_size));
  }
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps)) {
    return r.invalid("rms_norm_eps", "must be > 0");
  }
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) {
    return r.invalid("rope_theta", "must be > 0");
  }
  if (c.sliding_window < 0) return r.invalid("sliding_window", "must be > 0");
  if (c.bos_token_id >= c.vocab_size) {
    return r.invalid("bos_token_id", "(" + std::to_string(c.bos_token_id) +
                                         ") is not below vocab_size");
  }
  for (int32_t id : c.eos_token_ids) {
    if (id >= c.vocab_size) {
      return r.invalid("eos_token_id",
                       "(" + std::to_string(id) + ") is not below vocab_size");
    }
  }
  return Status::ok();
}

}  // namespace

Result<ModelConfig> ModelConfig::parse(const std::string& json_text, const std::string& source) {
  LG_ASSIGN_OR_RETURN(json root, parse_object(json_text, source));
  ModelConfig c;
  try {
    Reader r(root, source);

    // Architecture: architectures[0], else model_type.
    const ArchInfo* arch = nullptr;
    if (const json* a = r.get("architectures")) {
      if (!a->is_array() || a->empty() || !(*a)[0].is_string()) {
        return r.bad_type("architectures", "a non-empty list of strings", *a);
      }
      const std::string name = (*a)[0].get<std::string>();
      for (const ArchInfo& info : kArchs) {
        if (name == info.architecture) arch = &info;
      }
      if (!arch) {
        return Status::unsupported(source + ": architecture '" + name +
                                   "' is not supported (supported: " + kSupportedArchs + ")");
      }
    } else {
      std::string mt;
      LG_RETURN_IF_ERROR(r.opt_string("model_type", &mt));
      if (mt.empty()) {
        return Status::invalid_argument(source + ": missing both 'architectures' and 'model_type'");
      }
      for (const ArchInfo& info : kArchs) {
        if (mt == info.model_type) arch = &info;
      }
      if (!arch) {
        return Status::unsupported(source + ": model_type '" + mt +
                                   "' is not supported (supported: llama, mistral, qwen2)");
      }
    }
    c.architecture = arch->architecture;
    c.model_type = arch->model_type;
    const bool is_mistral = c.model_type == "mistral";
    const bool is_qwen2 = c.model_type == "qwen2";

    LG_RETURN_IF_ERROR(r.req_int("hidden_size", &c.hidden_size));
    LG_RETURN_IF_ERROR(r.req_int("intermediate_size", &c.intermediate_size));
    LG_RETURN_IF_ERROR(r.req_int("num_hidden_layers", &c.num_hidden_layers));
    LG_RETURN_IF_ERROR(r.req_int("num_attention_heads", &c.num_attention_heads));
    LG_RETURN_IF_ERROR(r.req_int("vocab_size", &c.vocab_size));
    if (c.num_attention_heads <= 0) {
      return r.invalid("num_attention_heads",
                       "must be > 0, got " + std::to_string(c.num_attention_heads));
    }
    c.num_key_value_heads = c.num_attention_heads;
    LG_RETURN_IF_ERROR(r.opt_int("num_key_value_heads", &c.num_key_value_heads));
    if (r.has("head_dim")) {
      LG_RETURN_IF_ERROR(r.opt_int("head_dim", &c.head_dim));
    } else {
      if (c.hidden_size % c.num_attention_heads != 0) {
        return r.invalid("num_attention_heads",
                         "(" + std::to_string(c.num_attention_heads) +
                             ") must divide hidden_size (" + std::to_string(c.hidden_size) +
                             ") when head_dim is absent");
      }
      c.head_dim = c.hidden_size / c.num_attention_heads;
    }
    LG_RETURN_IF_ERROR(r.opt_int("max_position_embeddings", &c.max_position_embeddings));
    LG_RETURN_IF_ERROR(r.opt_double("rms_norm_eps", &c.rms_norm_eps));
    LG_RETURN_IF_ERROR(r.opt_double("rope_theta", &c.rope_theta));
    LG_RETURN_IF_ERROR(parse_rope_scaling(r, &c.rope_scaling));
    LG_RETURN_IF_ERROR(r.opt_bool("tie_word_embeddings", &c.tie_word_embeddings));

    std::string act = "silu";
    LG_RETURN_IF_ERROR(r.opt_string("hidden_act", &act));
    if (act != "silu") {
      return Status::unsupported(source + ": hidden_act '" + act + "' is not supported (only silu)");
    }
    bool mlp_bias = false;
    LG_RETURN_IF_ERROR(r.opt_bool("mlp_bias", &mlp_bias));
    if (mlp_bias) return Status::unsupported(source + ": mlp_bias true is not supported");

    if (is_qwen2) {
      c.attention_bias = true;
    } else {
      LG_RETURN_IF_ERROR(r.opt_bool("attention_bias", &c.attention_bias));
    }

    if (is_mistral || is_qwen2) {
      bool use_sw = is_mistral;
      if (is_qwen2) LG_RETURN_IF_ERROR(r.opt_bool("use_sliding_window", &use_sw));
      int64_t sw = 0;
      LG_RETURN_IF_ERROR(r.opt_int("sliding_window", &sw));
      if (use_sw && r.has("sliding_window")) {
        if (sw <= 0) return r.invalid("sliding_window", "must be > 0, got " + std::to_string(sw));
        c.sliding_window = sw;
      }
    }

    LG_RETURN_IF_ERROR(r.opt_id("bos_token_id", &c.bos_token_id));
    LG_RETURN_IF_ERROR(r.opt_ids("eos_token_id", &c.eos_token_ids));
    LG_RETURN_IF_ERROR(validate(c, r));
  } catch (const json::exception& e) {
    return Status::corrupt(source + ": malformed config: " + e.what());
  }
  return c;
}

Result<ModelConfig> ModelConfig::load(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::not_found("no config.json in " + dir);
  std::string text;
  LG_RETURN_IF_ERROR(read_file(path, &text));
  LG_ASSIGN_OR_RETURN(ModelConfig c, parse(text, path));

  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gen_path, ec)) {
    std::string gen_text;
    LG_RETURN_IF_ERROR(read_file(gen_path, &gen_text));
    LG_ASSIGN_OR_RETURN(json gen, parse_object(gen_text, gen_path));
    try {
      Reader r(gen, gen_path);
      LG_RETURN_IF_ERROR(r.opt_ids("eos_token_id", &c.eos_token_ids));  // union, keeps order
      if (c.bos_token_id < 0) LG_RETURN_IF_ERROR(r.opt_id("bos_token_id", &c.bos_token_id));
      LG_RETURN_IF_ERROR(validate(c, Reader(gen, gen_path)));
    } catch (const json::exception& e) {
      return Status::corrupt(gen_path + ": malformed: " + e.what());
    }
  }
  return c;
}

std::string ModelConfig::to_json() const {
  ordered_json j;
  j["architectures"] = {architecture};
  j["model_type"] = model_type;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  switch (rope_scaling.type) {
    case RopeScalingType::kNone:
      j["rope_scaling"] = nullptr;
      break;
    case RopeScalingType::kLinear:
      j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", rope_scaling.factor}};
      break;
    case RopeScalingType::kLlama3:
      j["rope_scaling"] = {
          {"rope_type", "llama3"},
          {"factor", rope_scaling.factor},
          {"low_freq_factor", rope_scaling.low_freq_factor},
          {"high_freq_factor", rope_scaling.high_freq_factor},
          {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings}};
      break;
  }
  j["hidden_act"] = "silu";
  if (model_type == "qwen2") {
    j["use_sliding_window"] = sliding_window > 0;
    if (sliding_window > 0) j["sliding_window"] = sliding_window;
    else j["sliding_window"] = nullptr;
  } else {
    j["attention_bias"] = attention_bias;
    if (model_type == "mistral") {
      if (sliding_window > 0) j["sliding_window"] = sliding_window;
      else j["sliding_window"] = nullptr;
    }
  }
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  else j["bos_token_id"] = nullptr;
  if (eos_token_ids.empty()) j["eos_token_id"] = nullptr;
  else if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  else j["eos_token_id"] = eos_token_ids;
  return j.dump(2) + "\n";
}

}  // namespace loragate

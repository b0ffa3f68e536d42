#include "gateway/openai/request_fields.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace loragate {
namespace {

using nlohmann::json;

bool present(const json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

// A JSON integer, or a float with an integral value (16.0), as pydantic accepts.
std::optional<int64_t> as_integer(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.0e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// cache_salt: absent or null = no salt; else a non-empty string of at most
// kMaxCacheSaltBytes. The errors never quote it: it is the tenant's secret.
std::optional<ApiError> read_cache_salt(const json& body, std::string* out) {
  if (!present(body, "cache_salt")) return std::nullopt;
  const json& v = body.at("cache_salt");
  const char* rule = "cache_salt must be a non-empty string of at most 256 bytes";
  static_assert(kMaxCacheSaltBytes == 256, "the message above names the limit");
  if (!v.is_string()) return bad_request(std::string(rule) + ", got " + v.type_name(), "cache_salt");
  const std::string& salt = v.get_ref<const std::string&>();
  if (salt.empty()) return bad_request(std::string(rule) + ", got an empty string", "cache_salt");
  if (salt.size() > kMaxCacheSaltBytes) {
    return bad_request(std::string(rule) + ", got " + std::to_string(salt.size()) + " bytes", "cache_salt");
  }
  *out = salt;
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_json_object(std::string_view body, json* out) {
  try {
    *out = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    std::string what = e.what();
    const size_t bracket = what.find("] ");  // drop nlohmann's "[json.exception.parse_error.101] " tag
    if (what.rfind("[json.exception", 0) == 0 && bracket != std::string::npos) what = what.substr(bracket + 2);
    return bad_request("invalid JSON body: " + what);
  }
  if (!out->is_object()) return bad_request(std::string("the request body must be a JSON object, got ") + out->type_name());
  return std::nullopt;
}

std::optional<ApiError> read_int(const json& body, const char* key, int64_t min, int64_t max, const char* what,
                                 int64_t* out) {
  if (!present(body, key)) return std::nullopt;
  const std::optional<int64_t> v = as_integer(body.at(key));
  if (!v || *v < min || *v > max) return bad_request(std::string(key) + " must be " + what, key);
  *out = *v;
  return std::nullopt;
}

std::optional<ApiError> read_number(const json& body, const char* key, double* out) {
  if (!present(body, key)) return std::nullopt;
  const json& v = body.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) return bad_request(std::string(key) + " must be a number", key);
  *out = v.get<double>();
  return std::nullopt;
}

std::optional<ApiError> read_bool(const json& body, const char* key, bool* out) {
  if (!present(body, key)) return std::nullopt;
  const json& v = body.at(key);
  if (!v.is_boolean()) return bad_request(std::string(key) + " must be a boolean", key);
  *out = v.get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_string(const json& body, const char* key, std::string* out) {
  if (!present(body, key)) return std::nullopt;
  const json& v = body.at(key);
  if (!v.is_string()) return bad_request(std::string(key) + " must be a string", key);
  *out = v.get<std::string>();
  return std::nullopt;
}

// Penalties, logit_bias and min_tokens, checked as SamplingParams checks them but naming the field.
std::optional<ApiError> read_logit_processing(const json& body, SamplingParams* p) {
  struct Penalty {
    const char* key;
    float* out;
  };
  for (const Penalty& f : {Penalty{"presence_penalty", &p->presence_penalty},
                           Penalty{"frequency_penalty", &p->frequency_penalty},
                           Penalty{"repetition_penalty", &p->repetition_penalty}}) {
    double v = *f.out;
    if (auto err = read_number(body, f.key, &v)) return err;
    *f.out = static_cast<float>(v);
  }
  if (present(body, "logit_bias")) {
    const json& bias = body.at("logit_bias");
    if (!bias.is_object()) return bad_request("logit_bias must be an object of token id -> bias", "logit_bias");
    for (const auto& [key, value] : bias.items()) {
      int32_t token = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), token);
      if (ec != std::errc() || end != key.data() + key.size() || token < 0) {
        return bad_request("logit_bias keys must be token ids (non-negative integers as strings)", "logit_bias");
      }
      if (!value.is_number()) return bad_request("logit_bias values must be numbers in [-100, 100]", "logit_bias");
      p->logit_bias.emplace_back(token, value.get<float>());
    }
  }
  int64_t min_tokens = 0;
  if (auto err = read_int(body, "min_tokens", 0, std::numeric_limits<int32_t>::max(), "a non-negative integer",
                          &min_tokens)) {
    return err;
  }
  p->min_tokens = static_cast<int32_t>(min_tokens);
  SamplingParams check = *p;  // max_tokens may still be unset (-1): bound min_tokens by it only when given
  if (check.max_tokens < 0) check.max_tokens = std::numeric_limits<int32_t>::max();
  if (Status st = check.validate_logit_processing(); !st.is_ok()) {
    const std::string& m = st.message();
    const std::string field = m.substr(0, m.find(' '));
    return bad_request(m, field);
  }
  return std::nullopt;
}

std::optional<ApiError> read_common_fields(const json& body, bool chat, CommonFields* out) {
  if (auto err = read_string(body, "model", &out->model)) return err;
  if (auto err = read_string(body, "scenario", &out->scenario)) return err;
  std::string user;
  if (auto err = read_string(body, "user", &user)) return err;  // accepted, not used
  if (auto err = read_cache_salt(body, &out->cache_salt)) return err;

  SamplingParams& p = out->params;
  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  int64_t max_tokens = -1;
  if (auto err = read_int(body, "max_tokens", 0, kMaxTokens, "a non-negative integer", &max_tokens)) return err;
  if (chat) {
    if (auto err = read_int(body, "max_completion_tokens", 0, kMaxTokens, "a non-negative integer", &max_tokens)) {
      return err;
    }
  }
  p.max_tokens = static_cast<int32_t>(max_tokens);

  double temperature = 1.0;
  if (auto err = read_number(body, "temperature", &temperature)) return err;
  if (temperature < 0) return bad_request("temperature must be >= 0, got " + std::to_string(temperature), "temperature");
  p.temperature = static_cast<float>(temperature);
  double top_p = 1.0;
  if (auto err = read_number(body, "top_p", &top_p)) return err;
  if (!(top_p > 0 && top_p <= 1)) return bad_request("top_p must be in (0, 1], got " + std::to_string(top_p), "top_p");
  p.top_p = static_cast<float>(top_p);
  int64_t top_k = 0;
  if (auto err = read_int(body, "top_k", -1, std::numeric_limits<int32_t>::max(), "an integer >= -1 (-1 or 0 = all)",
                          &top_k)) {
    return err;
  }
  p.top_k = top_k < 0 ? 0 : static_cast<int32_t>(top_k);
  int64_t seed = 0;
  if (present(body, "seed")) {
    if (auto err = read_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                            "an integer", &seed)) {
      return err;
    }
    p.seed = static_cast<uint64_t>(seed);
  }
  if (present(body, "stop")) {
    const json& stop = body.at("stop");
    if (stop.is_string()) {
      p.stop = {stop.get<std::string>()};
    } else if (stop.is_array() && stop.size() <= 4) {
      for (const json& s : stop) {
        if (!s.is_string()) return bad_request("stop must be a string or a list of at most 4 strings", "stop");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      return bad_request("stop must be a string or a list of at most 4 strings", "stop");
    }
    for (const std::string& s : p.stop) {
      if (s.empty()) return bad_request("stop strings must not be empty", "stop");
    }
  }
  if (auto err = read_bool(body, "ignore_eos", &p.ignore_eos)) return err;  // vLLM extension

  int64_t n = 1;
  static_assert(kMaxChoices == 16, "the message below names the bound");
  if (auto err = read_int(body, "n", 1, kMaxChoices, "an integer from 1 to 16", &n)) return err;
  out->n = static_cast<int32_t>(n);
  // best_of > n (generate more, return the best n) is not implemented; best_of = n is plain n.
  int64_t best_of = n;
  if (auto err = read_int(body, "best_of", 1, std::numeric_limits<int64_t>::max(), "a positive integer", &best_of)) {
    return err;
  }
  if (best_of != 1 && best_of != n) {
    return bad_request("best_of is not supported: it must be 1 or equal to n (" + std::to_string(n) + "), got " +
                           std::to_string(best_of),
                       "best_of");
  }
  if (auto err = read_logit_processing(body, &p)) return err;

  if (auto err = read_bool(body, "stream", &out->stream)) return err;
  if (present(body, "stream_options")) {
    const json& so = body.at("stream_options");
    if (!so.is_object()) return bad_request("stream_options must be an object", "stream_options");
    if (auto err = read_bool(so, "include_usage", &out->include_usage)) {
      err->param = "stream_options.include_usage";
      err->message = "stream_options.include_usage must be a boolean";
      return err;
    }
  }
  return std::nullopt;
}

}  // namespace loragate

// Reading OpenAI request bodies: the JSON itself, typed optional fields that
// name themselves in errors ("max_tokens must be a non-negative integer"),
// and the fields /v1/completions and /v1/chat/completions share (sampling,
// stream, model, scenario, n, cache_salt, and the options loragate refuses by
// name).
// Unknown fields are ignored, as vLLM does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/api.h"
#include "gateway/openai/openai_errors.h"

namespace loragate {

// Parses a request body that must be a JSON object; the error says where parsing failed.
std::optional<ApiError> parse_json_object(std::string_view body, nlohmann::json* out);

// Each reads body[key] when present and not null; absent/null leaves *out alone.
std::optional<ApiError> read_int(const nlohmann::json& body, const char* key, int64_t min, int64_t max,
                                 const char* what, int64_t* out);
std::optional<ApiError> read_number(const nlohmann::json& body, const char* key, double* out);
std::optional<ApiError> read_bool(const nlohmann::json& body, const char* key, bool* out);
std::optional<ApiError> read_string(const nlohmann::json& body, const char* key, std::string* out);

// The fields both routes share.
struct CommonFields {
  std::string model;                // "" when absent
  std::string scenario;             // body field `scenario`; "" when absent
  SamplingParams params;            // max_tokens left at -1 when the body has none
  int32_t n = 1;                    // choices per prompt (each its own sequence; with a seed, choice i uses seed + i)
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  std::string cache_salt;           // the prefix cache's tenant salt (OpenAI/vLLM `cache_salt`); "" when absent.
                                    // A secret of the tenant's: never logged nor echoed, not even in errors.
};

// The most choices (`n`) one request may ask for per prompt.
inline constexpr int32_t kMaxChoices = 16;

// The longest cache_salt accepted, in bytes.
inline constexpr size_t kMaxCacheSaltBytes = 256;

// Reads the shared fields. `chat` also accepts max_completion_tokens.
std::optional<ApiError> read_common_fields(const nlohmann::json& body, bool chat, CommonFields* out);

}  // namespace loragate

// Small helpers to read tokenizer.json with errors that name file and key.
// `where` is always "<file>: <key path>", e.g. "tokenizer.json: model.merges[3]".
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "common/status.h"

namespace loragate::tok {

using Json = nlohmann::json;

inline Status json_corrupt(const std::string& where, const std::string& what) {
  return Status::corrupt(where + ": " + what);
}

inline std::string json_key(const std::string& where, const std::string& key) {
  // The first key after "<file>: " needs no dot.
  return where.ends_with(": ") ? where + key : where + "." + key;
}

// The string `obj[key]`; an error when missing or not a string.
inline Result<std::string> json_string(const Json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return json_corrupt(json_key(where, key), "missing");
  if (!it->is_string()) return json_corrupt(json_key(where, key), "expected a string");
  return it->get<std::string>();
}

// `obj[key]` as a string when present and a string, else `fallback` (null counts as absent).
inline Result<std::string> json_string_or(const Json& obj, const char* key, const std::string& fallback,
                                          const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) return json_corrupt(json_key(where, key), "expected a string");
  return it->get<std::string>();
}

inline Result<bool> json_bool_or(const Json& obj, const char* key, bool fallback, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return json_corrupt(json_key(where, key), "expected true or false");
  return it->get<bool>();
}

inline Result<int64_t> json_int_or(const Json& obj, const char* key, int64_t fallback, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) return json_corrupt(json_key(where, key), "expected an integer");
  return it->get<int64_t>();
}

// The "type" field of a component object.
inline Result<std::string> json_type(const Json& obj, const std::string& where) {
  if (!obj.is_object()) return json_corrupt(where, "expected an object");
  return json_string(obj, "type", where);
}

}  // namespace loragate::tok

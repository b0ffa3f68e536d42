// One list of a struct's fields drives both its JSON writer and its reader,
// so the two cannot drift apart (a field written and never read back, or read
// under another key). A struct lists its fields once, beside it:
//
//   LG_JSON_FIELDS(Step) {  // s: the Step (const when writing), f: the walker
//     f("scenario", s.scenario);
//     f("error", s.error, json_fields::kOmitEmpty);
//   }
//
// and fields_to_json(s) / fields_from_json(j, &s) walk that list. Reading is
// tolerant, for records the program wrote itself: an absent key or one of
// another type keeps the member's current value.
//
// Members may be std::string, bool, int64_t, int32_t, double, and
// std::vector<std::string>. Header-only; pure functions.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

// The field list of `Type`: a function template list_fields(f, s), found by
// argument-dependent lookup, for Type and const Type alike.
#define LG_JSON_FIELDS(Type)                                          \
  template <class Fields, class S>                                    \
    requires std::same_as<std::remove_const_t<S>, Type>               \
  void list_fields(Fields& f, S& s)

namespace loragate::json_fields {

enum Omit { kAlways, kOmitEmpty };  // kOmitEmpty: an empty string or list is not written

class Writer {
 public:
  explicit Writer(nlohmann::json* out) : out_(out) {}
  void operator()(const char* key, const std::string& v, Omit omit = kAlways) {
    if (omit == kAlways || !v.empty()) (*out_)[key] = v;
  }
  void operator()(const char* key, const std::vector<std::string>& v, Omit omit = kAlways) {
    if (omit == kAlways || !v.empty()) (*out_)[key] = v;
  }
  template <class T>
  void operator()(const char* key, const T& v, Omit = kAlways) {
    (*out_)[key] = v;
  }

 private:
  nlohmann::json* out_;
};

class Reader {
 public:
  explicit Reader(const nlohmann::json& in) : in_(in) {}
  void operator()(const char* key, std::string& v, Omit = kAlways) {
    if (const nlohmann::json* j = find(key); j != nullptr && j->is_string()) v = j->get<std::string>();
  }
  void operator()(const char* key, bool& v, Omit = kAlways) {
    if (const nlohmann::json* j = find(key); j != nullptr && j->is_boolean()) v = j->get<bool>();
  }
  void operator()(const char* key, int64_t& v, Omit = kAlways) {
    if (const nlohmann::json* j = find(key); j != nullptr && j->is_number_integer()) v = j->get<int64_t>();
  }
  void operator()(const char* key, int32_t& v, Omit = kAlways) {
    if (const nlohmann::json* j = find(key); j != nullptr && j->is_number_integer()) v = j->get<int32_t>();
  }
  void operator()(const char* key, double& v, Omit = kAlways) {
    if (const nlohmann::json* j = find(key); j != nullptr && j->is_number()) v = j->get<double>();
  }
  void operator()(const char* key, std::vector<std::string>& v, Omit = kAlways) {
    const nlohmann::json* j = find(key);
    if (j == nullptr || !j->is_array()) return;
    v.clear();
    for (const nlohmann::json& e : *j) {
      if (e.is_string()) v.push_back(e.get<std::string>());
    }
  }

 private:
  const nlohmann::json* find(const char* key) const {
    if (!in_.is_object()) return nullptr;
    auto it = in_.find(key);
    return it == in_.end() ? nullptr : &*it;
  }
  const nlohmann::json& in_;
};

// The JSON object of `s`'s listed fields.
template <class S>
nlohmann::json fields_to_json(const S& s) {
  nlohmann::json out = nlohmann::json::object();
  Writer w(&out);
  list_fields(w, s);
  return out;
}

// Reads `j` into `s`'s listed fields (tolerant: see above).
template <class S>
void fields_from_json(const nlohmann::json& j, S* s) {
  Reader r(j);
  list_fields(r, *s);
}

}  // namespace loragate::json_fields

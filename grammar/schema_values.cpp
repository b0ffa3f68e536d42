#include "grammar/schema_values.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

namespace loragate::grammar {

const std::set<std::string>& schema_annotations() {
  static const std::set<std::string> k = {"title",    "description", "default",  "examples",  "$schema", "$id",
                                          "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
  return k;
}

namespace schema_values {

// Keywords a merge understands (the compiler's subset).
const std::set<std::string>& comb_mergeable() {
  static const std::set<std::string> k = {
      "type",      "properties", "required",  "additionalProperties", "enum",    "const",   "anyOf",
      "allOf",     "$ref",       "items",     "prefixItems",          "minItems", "maxItems", "minLength",
      "maxLength", "pattern",    "format",    "minimum",              "maximum", "exclusiveMinimum",
      "exclusiveMaximum", "multipleOf"};
  return k;
}

Status comb_error(const std::string& what) { return Status::invalid_argument("allOf: " + what); }

bool comb_is_false(const ojson& s) { return s.is_boolean() && !s.get<bool>(); }

// ---- types as sets of atoms: "number" is integer + fraction, so integer ∩ number = integer.

std::optional<unsigned> comb_type_name_atoms(const std::string& name) {
  if (name == "null") return kAtomNull;
  if (name == "boolean") return kAtomBool;
  if (name == "object") return kAtomObject;
  if (name == "array") return kAtomArray;
  if (name == "string") return kAtomString;
  if (name == "integer") return kAtomInteger;
  if (name == "number") return kAtomInteger | kAtomFraction;
  return std::nullopt;
}

Result<unsigned> comb_type_atoms(const ojson& t) {
  std::vector<std::string> names;
  if (t.is_string()) {
    names.push_back(t.get<std::string>());
  } else if (t.is_array() && !t.empty()) {
    for (const ojson& one : t) {
      if (!one.is_string()) return comb_error("'type' must be a string or a non-empty list of strings");
      names.push_back(one.get<std::string>());
    }
  } else {
    return comb_error("'type' must be a string or a non-empty list of strings");
  }
  unsigned atoms = 0;
  for (const std::string& n : names) {
    const std::optional<unsigned> a = comb_type_name_atoms(n);
    if (!a) return comb_error("unknown type '" + n + "'");
    atoms |= *a;
  }
  return atoms;
}

bool comb_is_whole(double d) { return std::isfinite(d) && std::floor(d) == d; }

unsigned comb_value_atoms(const ojson& v) {
  if (v.is_null()) return kAtomNull;
  if (v.is_boolean()) return kAtomBool;
  if (v.is_object()) return kAtomObject;
  if (v.is_array()) return kAtomArray;
  if (v.is_string()) return kAtomString;
  if (v.is_number_integer()) return kAtomInteger;
  return comb_is_whole(v.get<double>()) ? kAtomInteger : kAtomFraction;  // 1.0 is an integer
}

// `atoms` written as a type keyword, names in the order of `first` (the first member's type).
ojson comb_type_json(unsigned atoms, const ojson& first) {
  std::vector<std::string> order;
  if (first.is_string()) order.push_back(first.get<std::string>());
  for (const ojson& n : first.is_array() ? first : ojson::array()) order.push_back(n.get<std::string>());
  ojson out = ojson::array();
  for (const std::string& n : order) {
    const unsigned a = comb_type_name_atoms(n).value_or(0) & atoms;
    if (a == 0) continue;
    const std::string name = a == (kAtomInteger | kAtomFraction) ? "number" : a == kAtomInteger ? "integer" : n;
    if (std::find(out.begin(), out.end(), ojson(name)) == out.end()) out.push_back(name);
  }
  return out.size() == 1 ? out[0] : out;
}

std::string comb_type_text(const ojson& t) { return t.is_string() ? t.get<std::string>() : t.dump(); }

// ---- JSON values

// Exact on every int64/uint64/double (long double holds 64 bits of mantissa).
long double comb_number(const ojson& v) {
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
  return static_cast<long double>(v.get<double>());
}

// JSON Schema equality: numbers by value (1 == 1.0), objects regardless of key order.
bool comb_json_equal(const ojson& a, const ojson& b) {
  if (a.is_number() && b.is_number()) return comb_number(a) == comb_number(b);
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!comb_json_equal(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items()) {
      const auto it = b.find(key);
      if (it == b.end() || !comb_json_equal(value, *it)) return false;
    }
    return true;
  }
  return a == b;
}

size_t comb_code_points(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

const ojson* comb_resolve(const ResolveRef& resolve, const ojson& ref_value, Status& error) {
  if (!ref_value.is_string()) {
    error = comb_error("'$ref' must be a string");
    return nullptr;
  }
  const ojson* target = resolve ? resolve(ref_value.get<std::string>()) : nullptr;
  if (target == nullptr) error = comb_error("$ref '" + ref_value.get<std::string>() + "' points at nothing");
  return target;
}

// Whether the value `v` matches schema `s` (2020-12 semantics, the supported
// subset). Errors where it cannot tell: pattern, format, unknown keywords.
Result<bool> comb_matches(const ojson& v, const ojson& s, const ResolveRef& resolve, int refs) {
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) return comb_error("a schema must be an object or a boolean");
  for (const auto& [key, k] : s.items()) {
    if (schema_annotations().count(key) != 0) continue;
    bool ok = true;
    if (key == "$ref") {
      if (refs >= kCombMaxRefs) return comb_error("$ref chains deeper than " + std::to_string(kCombMaxRefs) + " levels");
      Status error;
      const ojson* target = comb_resolve(resolve, k, error);
      if (target == nullptr) return error;
      LG_ASSIGN_OR_RETURN(ok, comb_matches(v, *target, resolve, refs + 1));
    } else if (key == "type") {
      LG_ASSIGN_OR_RETURN(const unsigned atoms, comb_type_atoms(k));
      ok = (atoms & comb_value_atoms(v)) != 0;
    } else if (key == "enum") {
      if (!k.is_array()) return comb_error("'enum' must be an array");
      ok = std::any_of(k.begin(), k.end(), [&](const ojson& e) { return comb_json_equal(v, e); });
    } else if (key == "const") {
      ok = comb_json_equal(v, k);
    } else if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" || key == "exclusiveMaximum") {
      if (!k.is_number()) return comb_error("'" + key + "' must be a number");
      if (!v.is_number()) continue;
      const long double x = comb_number(v), b = comb_number(k);
      ok = key == "minimum" ? x >= b : key == "maximum" ? x <= b : key == "exclusiveMinimum" ? x > b : x < b;
    } else if (key == "minLength" || key == "maxLength" || key == "minItems" || key == "maxItems") {
      if (!k.is_number_integer() || comb_number(k) < 0) return comb_error("'" + key + "' must be a non-negative integer");
      const bool strings = key == "minLength" || key == "maxLength";
      if (strings ? !v.is_string() : !v.is_array()) continue;
      const size_t n = strings ? comb_code_points(v.get<std::string>()) : v.size();
      ok = key.starts_with("min") ? n >= k.get<uint64_t>() : n <= k.get<uint64_t>();
    } else if (key == "multipleOf") {
      if (!v.is_number()) continue;
      // Exact for whole numbers; a fraction is not checked here.
      if (!v.is_number_integer() || !k.is_number_integer() || k.get<int64_t>() <= 0) {
        return comb_error("cannot check an 'enum' value against 'multipleOf' " + k.dump());
      }
      ok = v.get<int64_t>() % k.get<int64_t>() == 0;
    } else if (key == "pattern" || key == "format") {
      if (v.is_string()) return comb_error("cannot check an 'enum' value against '" + key + "'");
    } else if (key == "prefixItems" || key == "items") {
      if (!k.is_array() && key == "prefixItems") return comb_error("'prefixItems' must be an array");
      if (k.is_array() && key == "items") return comb_error("'items' as an array is not supported (use prefixItems)");
      if (!v.is_array()) continue;
      const size_t prefix = s.contains("prefixItems") && s.at("prefixItems").is_array() ? s.at("prefixItems").size() : 0;
      const size_t from = key == "items" ? prefix : 0, to = key == "items" ? v.size() : std::min(prefix, v.size());
      for (size_t i = from; i < to && ok; ++i) {
        LG_ASSIGN_OR_RETURN(ok, comb_matches(v[i], key == "items" ? k : k[i], resolve, refs));
      }
    } else if (key == "properties" || key == "additionalProperties") {
      if (!v.is_object()) continue;
      const ojson& props = s.contains("properties") ? s.at("properties") : ojson::object();
      if (!props.is_object()) return comb_error("'properties' must be an object");
      for (const auto& [name, value] : v.items()) {
        const bool listed = props.contains(name);
        if (key == "properties" ? !listed : listed) continue;
        LG_ASSIGN_OR_RETURN(ok, comb_matches(value, key == "properties" ? props.at(name) : k, resolve, refs));
        if (!ok) break;
      }
    } else if (key == "required") {
      if (!k.is_array()) return comb_error("'required' must be an array of names");
      if (!v.is_object()) continue;
      for (const ojson& name : k) {
        if (!name.is_string()) return comb_error("'required' must be an array of names");
        ok = ok && v.contains(name.get<std::string>());
      }
    } else if (key == "anyOf" || key == "allOf") {
      if (!k.is_array() || k.empty()) return comb_error("'" + key + "' must be a non-empty array");
      ok = key == "allOf";
      for (const ojson& sub : k) {
        LG_ASSIGN_OR_RETURN(const bool m, comb_matches(v, sub, resolve, refs));
        if (m != ok) {
          ok = m;
          break;
        }
      }
    } else {
      return comb_error("keyword '" + key + "' is not supported");
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace schema_values
}  // namespace loragate::grammar

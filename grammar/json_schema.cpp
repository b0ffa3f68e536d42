#include "grammar/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "grammar/gbnf.h"
#include "grammar/number_range.h"
#include "grammar/regex_grammar.h"
#include "grammar/schema_combinators.h"

namespace loragate::grammar {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kMaxSchemaDepth = 64;
constexpr size_t kMaxSchemaGbnfBytes = 1 << 20;
constexpr size_t kMaxRules = 4096;

// Keywords this compiler turns into grammar.
const std::set<std::string>& supported() {
  static const std::set<std::string> k = {
      "type",     "properties", "required",  "additionalProperties", "enum",     "const",     "anyOf",
      "allOf",      "$ref",      "items",                "prefixItems", "minItems", "maxItems",
      "minLength", "maxLength", "pattern",   "format",               "minimum",  "maximum",   "exclusiveMinimum",
      "exclusiveMaximum", "multipleOf", "oneOf"};
  return k;
}

// A GBNF string literal for raw bytes (UTF-8 passes through as characters).
std::string literal(std::string_view bytes) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "\"";
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string rule_name(std::string_view hint) {
  std::string out;
  for (char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    out += ok ? c : '-';
  }
  return out.empty() ? "s" : out;
}

class SchemaWriter {
 public:
  SchemaWriter(const ojson& root, const JsonSchemaOptions& options) : root_(root), options_(options) {}

  Result<JsonSchemaGbnf> write() {
    LG_ASSIGN_OR_RETURN(std::string top, expr(root_, "root-value", "(root)", 0));
    std::string gbnf = "root ::= " + top + "\n";
    gbnf += std::string("ws ::= ") + (options_.whitespace == JsonWhitespace::kCompact ? "\"\"" : "[ \\t\\n]{0,20}") +
            "\n";
    for (const auto& [name, body] : rules_) gbnf += name + " ::= " + body + "\n";
    for (const auto& [name, body] : primitives_) gbnf += name + " ::= " + body + "\n";
    return JsonSchemaGbnf{std::move(gbnf), std::move(patterns_)};
  }

 private:
  static Status error(const std::string& path, const std::string& what) {
    return Status::invalid_argument("json schema " + path + ": " + what);
  }

  // A primitive rule, defined once when first used.
  std::string primitive(const std::string& name) {
    static const std::map<std::string, std::string> kBodies = {
        {"json-char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )"},
        {"json-string", "\"\\\"\" json-char* \"\\\"\""},
        {"json-int", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"},
        // Exponents of two digits at most: 16 digits and e+99 stay far inside a
        // double (e835 is valid JSON text that most parsers turn into inf or refuse).
        {"json-frac-exp", "( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?"},
        {"json-number", "json-int json-frac-exp"},
        {"json-bool", "\"true\" | \"false\""},
        {"json-null", "\"null\""},
        {"json-value", "json-object | json-array | json-string | json-number | json-bool | json-null"},
        {"json-object", "\"{\" ws ( json-member ( \",\" ws json-member )* )? \"}\""},
        {"json-member", "json-string ws \":\" ws json-value ws"},
        {"json-array", "\"[\" ws ( json-value ws ( \",\" ws json-value ws )* )? \"]\""},
        // Calendar dates only: each month's days, February 29 in leap years (the
        // Gregorian rule), years 0001-9999 (what RFC 3339 validators accept).
        {"fmt-date", "fmt-year \"-\" fmt-month-day | fmt-leap-year \"-02-29\""},
        {"fmt-year", "[1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] [0-9] | \"000\" [1-9]"},
        {"fmt-month-day",
         "( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
         "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
         "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] )"},
        {"fmt-leap-year",
         "[0-9] [0-9] ( [02468] [48] | [13579] [26] | [2468] \"0\" ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\""},
        {"fmt-time",
         "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
         "( \"Z\" | [+\\x2D] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
        {"fmt-date-time", "fmt-date \"T\" fmt-time"},
        {"fmt-uuid",
         "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}"},
        // A plain addr-spec (a subset of the valid ones): a dot-atom local part
        // of at most 54 bytes (under RFC 5321's 64; no leading, trailing or
        // doubled dots), host labels that start and end with a letter or digit.
        {"fmt-email",
         "fmt-email-atom{1,32} ( \".\" fmt-email-atom{1,10} ){0,2} \"@\" fmt-host-label ( \".\" fmt-host-label ){0,8} "
         "\".\" [A-Za-z]{2,24}"},
        {"fmt-email-atom", "[A-Za-z0-9_%+\\x2D]"},
        // RFC 1123 host names: dot-separated labels of at most 62 bytes (under
        // 63) that start and end with a letter or digit; at most 9 labels.
        {"fmt-hostname", "fmt-host-label ( \".\" fmt-host-label ){0,8}"},
        {"fmt-host-label", "[A-Za-z0-9]{1,20} ( \"-\" [A-Za-z0-9]{1,20} ){0,2}"},
        // Dotted quads without leading zeros.
        {"fmt-ipv4", "fmt-ipv4-octet ( \".\" fmt-ipv4-octet ){3}"},
        {"fmt-ipv4-octet", "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]"},
        // The full form: eight groups of 1-4 hex digits (no "::" shortening).
        {"fmt-ipv6", "[0-9a-f]{1,4} ( \":\" [0-9a-f]{1,4} ){7}"},
        // ISO 8601 durations as RFC 3339's appendix A writes them: P1Y2M3DT4H5M6S, PT30M, P2W.
        {"fmt-duration", "\"P\" ( fmt-dur-date fmt-dur-time? | fmt-dur-time | [0-9]{1,9} \"W\" )"},
        {"fmt-dur-date",
         "[0-9]{1,9} \"D\" | [0-9]{1,9} \"M\" ( [0-9]{1,9} \"D\" )? | "
         "[0-9]{1,9} \"Y\" ( [0-9]{1,9} \"M\" ( [0-9]{1,9} \"D\" )? )?"},
        {"fmt-dur-time",
         "\"T\" ( [0-9]{1,9} \"H\" ( [0-9]{1,9} \"M\" ( [0-9]{1,9} \"S\" )? )? | [0-9]{1,9} \"M\" ( [0-9]{1,9} \"S\" )? | "
         "[0-9]{1,9} \"S\" )"},
    };
    if (primitives_.count(name) == 0) {
      primitives_[name] = kBodies.at(name);
      // The rules a primitive's body names.
      for (const auto& [dep, unused] : kBodies) {
        if (dep != name && kBodies.at(name).find(dep) != std::string::npos) primitive(dep);
      }
    }
    return name;
  }

  // A rule name from `hint` that no rule has yet, now taken.
  std::string unique_name(const std::string& hint) {
    std::string name = rule_name(hint);
    for (int i = 1; taken_.count(name) != 0; ++i) name = rule_name(hint) + "-" + std::to_string(i);
    taken_.insert(name);
    return name;
  }

  std::string add_rule(const std::string& hint, std::string body) {
    std::string name = unique_name(hint);
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  Result<std::string> expr(const ojson& s, const std::string& hint, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) return error(path, "nested deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
    if (rules_.size() > kMaxRules) return error(path, "needs more than " + std::to_string(kMaxRules) + " rules");
    if (s.is_boolean()) {
      if (!s.get<bool>()) return error(path, "the schema false allows no value");
      return primitive("json-value");
    }
    if (!s.is_object()) return error(path, "a schema must be an object or a boolean");
    for (const auto& [key, unused] : s.items()) {
      if (supported().count(key) == 0 && schema_annotations().count(key) == 0) {
        return error(path, "keyword '" + key + "' is not supported");
      }
    }
    if (s.contains("$ref")) return reference(s, path, depth);
    const ResolveRef resolve = [this](const std::string& ref) { return resolve_pointer(ref); };
    // oneOf whose branches no value can match two of is anyOf; any other is refused.
    if (s.contains("oneOf")) {
      auto disjoint = one_of_branches_disjoint(s["oneOf"], resolve);
      if (!disjoint.is_ok()) return error(path, "oneOf: " + disjoint.status().message());
      if (!*disjoint) {
        return error(path, "oneOf is supported only where no value can match two of its branches (then it is anyOf); "
                           "this one could not be shown to be so");
      }
      ojson any = s;
      any["anyOf"] = any["oneOf"];
      any.erase("oneOf");
      return expr(any, hint, path, depth + 1);
    }
    // allOf, and const / enum / anyOf with other constraints beside them (which
    // apply too), become one schema that accepts exactly the intersection.
    if (s.contains("allOf") || has_constraints_beside_choices(s)) {
      auto merged = merge_all_of(s.contains("allOf") ? s : ojson{{"allOf", ojson::array({s})}}, resolve);
      if (!merged.is_ok()) return error(path, merged.status().message());
      return expr(*merged, hint, path, depth + 1);
    }
    if (s.contains("const")) return literal(s["const"].dump());
    if (s.contains("enum")) {
      const ojson& e = s["enum"];
      if (!e.is_array() || e.empty()) return error(path, "enum must be a non-empty array");
      std::vector<std::string> alts;
      for (const ojson& v : e) alts.push_back(literal(v.dump()));
      return gbnf_alternatives(alts);
    }
    for (const char* key : {"anyOf"}) {
      if (!s.contains(key)) continue;
      const ojson& list = s[key];
      if (!list.is_array() || list.empty()) return error(path, std::string(key) + " must be a non-empty array");
      std::vector<std::string> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        LG_ASSIGN_OR_RETURN(std::string alt,
                            expr(list[i], hint + "-" + std::to_string(i), path + "/" + key + "/" + std::to_string(i),
                                 depth + 1));
        alts.push_back(std::move(alt));
      }
      return add_rule(hint, gbnf_alternatives(alts));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const ojson& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const ojson& one : t) {
          if (!one.is_string()) return error(path, "type must be a string or a list of strings");
          types.push_back(one.get<std::string>());
        }
      } else {
        return error(path, "type must be a string or a non-empty list of strings");
      }
    } else {
      types.push_back(inferred_type(s));
    }
    std::vector<std::string> alts;
    for (const std::string& t : types) {
      LG_ASSIGN_OR_RETURN(std::string alt, typed(s, t, hint + (types.size() > 1 ? "-" + t : ""), path, depth));
      alts.push_back(std::move(alt));
    }
    return gbnf_alternatives(alts);
  }

  // const, enum or anyOf with another constraining keyword beside it.
  static bool has_constraints_beside_choices(const ojson& s) {
    int choices = 0, others = 0;
    for (const auto& [key, unused] : s.items()) {
      if (key == "const" || key == "enum" || key == "anyOf") {
        ++choices;
      } else if (schema_annotations().count(key) == 0) {
        ++others;
      }
    }
    return choices > 0 && choices + others > 1;
  }

  // The target of "#..." in the root, or nullptr.
  const ojson* resolve_pointer(const std::string& ref) const {
    if (!ref.starts_with("#")) return nullptr;
    if (ref.size() == 1) return &root_;
    try {
      const ojson::json_pointer pointer(nlohmann::json::json_pointer(ref.substr(1)).to_string());
      return root_.contains(pointer) ? &root_.at(pointer) : nullptr;
    } catch (const nlohmann::json::exception&) {
      return nullptr;
    }
  }

  static std::string inferred_type(const ojson& s) {
    for (const char* k : {"properties", "required", "additionalProperties"}) {
      if (s.contains(k)) return "object";
    }
    for (const char* k : {"items", "prefixItems", "minItems", "maxItems"}) {
      if (s.contains(k)) return "array";
    }
    for (const char* k : {"minLength", "maxLength", "pattern", "format"}) {
      if (s.contains(k)) return "string";
    }
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}) {
      if (s.contains(k)) return "number";
    }
    return "any";
  }

  Result<std::string> reference(const ojson& s, const std::string& path, int depth) {
    if (s.size() != 1 && std::any_of(s.items().begin(), s.items().end(), [](const auto& kv) {
          return kv.key() != "$ref" && schema_annotations().count(kv.key()) == 0;
        })) {
      return error(path, "$ref next to other keywords is not supported");
    }
    if (!s["$ref"].is_string()) return error(path, "$ref must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (!ref.starts_with("#")) return error(path, "$ref '" + ref + "': only references inside the schema (#...) are supported");
    const ojson* target = &root_;
    if (ref.size() > 1) {
      nlohmann::json::json_pointer pointer;
      try {
        pointer = nlohmann::json::json_pointer(ref.substr(1));
      } catch (const nlohmann::json::exception&) {
        return error(path, "$ref '" + ref + "' is not a JSON pointer");
      }
      const ojson::json_pointer opointer(pointer.to_string());
      if (!root_.contains(opointer)) return error(path, "$ref '" + ref + "' points at nothing");
      target = &root_.at(opointer);
    }
    // Named before it is written, so that a recursive schema refers to itself.
    const std::string name = add_rule("ref" + rule_name(ref.substr(1)), "");
    refs_[ref] = name;
    const size_t index = rules_.size() - 1;
    LG_ASSIGN_OR_RETURN(std::string body, expr(*target, name + "-body", ref, depth + 1));
    rules_[index].second = std::move(body);
    return name;
  }

  Result<std::string> typed(const ojson& s, const std::string& type, const std::string& hint, const std::string& path,
                            int depth) {
    if (type == "any") return primitive("json-value");
    if (type == "null") return primitive("json-null");
    if (type == "boolean") return primitive("json-bool");
    if (type == "string") return string_expr(s, hint, path);
    if (type == "integer" || type == "number") return number_expr(s, type == "integer", hint, path);
    if (type == "array") return array_expr(s, hint, path, depth);
    if (type == "object") return object_expr(s, hint, path, depth);
    return error(path, "unknown type '" + type + "'");
  }

  Result<int64_t> count(const ojson& s, const char* key, const std::string& path, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    const ojson& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000) {
      return error(path, std::string(key) + " must be an integer from 0 to 100000");
    }
    return v.get<int64_t>();
  }

  Result<std::string> string_expr(const ojson& s, const std::string& hint, const std::string& path) {
    const bool has_length = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
      if (!s["format"].is_string()) return error(path, "format must be a string");
      const std::string f = s["format"].get<std::string>();
      static const std::set<std::string> kFormats = {"date", "time",     "date-time", "duration", "uuid",
                                                     "email", "hostname", "ipv4",      "ipv6"};
      if (kFormats.count(f) == 0) {
        return error(path, "format '" + f +
                               "' is not supported (date, time, date-time, duration, uuid, email, hostname, ipv4, "
                               "ipv6 are)");
      }
      if (has_length || s.contains("pattern")) return error(path, "format together with minLength/maxLength/pattern is not supported");
      return "\"\\\"\" " + primitive("fmt-" + f) + " \"\\\"\"";
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return error(path, "pattern must be a string");
      if (has_length) return error(path, "pattern together with minLength/maxLength is not supported");
      const std::string name = add_rule("pattern", "\"\"");  // filled in by compile_json_schema
      patterns_.emplace_back(name, s["pattern"].get<std::string>());
      return "\"\\\"\" " + name + " \"\\\"\"";
    }
    LG_ASSIGN_OR_RETURN(const int64_t min, count(s, "minLength", path, 0));
    LG_ASSIGN_OR_RETURN(const int64_t max, count(s, "maxLength", path, -1));
    if (max >= 0 && max < min) return error(path, "maxLength is below minLength");
    if (!has_length) return primitive("json-string");
    const std::string reps = "{" + std::to_string(min) + "," + (max >= 0 ? std::to_string(max) : "") + "}";
    return add_rule(hint, "\"\\\"\" " + primitive("json-char") + reps + " \"\\\"\"");
  }

  // Reads a bound: a number with at most kMaxBoundDigits digits either side of the point.
  Result<std::optional<NumberBound>> bound(const ojson& s, const char* key, bool inclusive, const std::string& path) {
    if (!s.contains(key)) return std::optional<NumberBound>();
    auto value = decimal_from_json(s[key]);
    if (!value.is_ok()) return error(path, std::string(key) + " " + value.status().message());
    return std::optional<NumberBound>(NumberBound{std::move(value).value(), inclusive});
  }

  // The tighter of two lower (or upper) bounds.
  static std::optional<NumberBound> tighter(std::optional<NumberBound> a, std::optional<NumberBound> b, bool lower) {
    if (!a) return b;
    if (!b) return a;
    const int c = compare(a->value, b->value);
    if (c == 0) return a->inclusive ? b : a;  // the exclusive one is tighter
    return (c > 0) == lower ? a : b;
  }

  // -1, 0, 1 as a < b, a == b, a > b.
  static int compare(const Decimal& a, const Decimal& b) {
    if (a.negative != b.negative) return a.negative ? -1 : 1;
    const auto magnitude = [](const Decimal& d, const Decimal& e) {
      if (d.integer.size() != e.integer.size()) return d.integer.size() < e.integer.size() ? -1 : 1;
      if (const int c = d.integer.compare(e.integer); c != 0) return c < 0 ? -1 : 1;
      if (const int c = d.fraction.compare(e.fraction); c != 0) return c < 0 ? -1 : 1;
      return 0;
    };
    const int c = magnitude(a, b);
    return a.negative ? -c : c;
  }

  Result<std::string> number_expr(const ojson& s, bool integer, const std::string& hint, const std::string& path) {
    LG_ASSIGN_OR_RETURN(std::optional<NumberBound> lo, bound(s, "minimum", true, path));
    LG_ASSIGN_OR_RETURN(std::optional<NumberBound> hi, bound(s, "maximum", true, path));
    LG_ASSIGN_OR_RETURN(std::optional<NumberBound> xlo, bound(s, "exclusiveMinimum", false, path));
    LG_ASSIGN_OR_RETURN(std::optional<NumberBound> xhi, bound(s, "exclusiveMaximum", false, path));
    lo = tighter(lo, xlo, /*lower=*/true);
    hi = tighter(hi, xhi, /*lower=*/false);
    int fraction_digits = kMaxBoundDigits;
    if (s.contains("multipleOf")) {
      auto step = decimal_from_json(s["multipleOf"]);
      if (!step.is_ok()) return error(path, "multipleOf " + step.status().message());
      if (step->negative || (step->integer == "0" && step->fraction.empty())) {
        return error(path, "multipleOf must be above 0");
      }
      if (step->fraction.empty()) {  // whole multiples (of a number too: they are whole numbers)
        auto multiples = multiples_gbnf(std::stoll(step->integer), lo, hi, unique_name(hint + "-mult"));
        if (!multiples.is_ok()) return error(path, multiples.status().message());
        for (auto& [name, body] : multiples->rules) {
          taken_.insert(name);
          rules_.emplace_back(std::move(name), std::move(body));
        }
        return add_rule(hint, multiples->expr);
      }
      // 0.1, 0.01, ...: at most that many digits after the point.
      const bool power_of_ten = step->integer == "0" && step->fraction.back() == '1' &&
                                step->fraction.find_first_not_of('0') == step->fraction.size() - 1;
      if (!power_of_ten) {
        return error(path, "multipleOf " + s["multipleOf"].dump() +
                               " is supported as a whole number or a power of ten (0.1, 0.01, ...)");
      }
      fraction_digits = static_cast<int>(step->fraction.size());
    }
    if (!lo && !hi && fraction_digits == kMaxBoundDigits) return primitive(integer ? "json-int" : "json-number");
    // No exponent when bounded: the grammar compares digits.
    std::optional<std::string> body = bounded_number_gbnf(lo, hi, integer, fraction_digits);
    if (!body) return error(path, "the bounds leave no number");
    return add_rule(hint, *body);
  }

  Result<std::string> array_expr(const ojson& s, const std::string& hint, const std::string& path, int depth) {
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const ojson& p = s["prefixItems"];
      if (!p.is_array()) return error(path, "prefixItems must be an array");
      for (size_t i = 0; i < p.size(); ++i) {
        LG_ASSIGN_OR_RETURN(std::string e, expr(p[i], hint + "-" + std::to_string(i),
                                                path + "/prefixItems/" + std::to_string(i), depth + 1));
        prefix.push_back(std::move(e));
      }
    }
    std::string item;
    bool more_allowed = true;
    if (s.contains("items")) {
      if (s["items"].is_boolean() && !s["items"].get<bool>()) {
        more_allowed = false;
      } else {
        LG_ASSIGN_OR_RETURN(item, expr(s["items"], hint + "-item", path + "/items", depth + 1));
      }
    } else {
      item = primitive("json-value");
    }
    LG_ASSIGN_OR_RETURN(int64_t min, count(s, "minItems", path, 0));
    LG_ASSIGN_OR_RETURN(int64_t max, count(s, "maxItems", path, -1));
    const auto fixed = static_cast<int64_t>(prefix.size());
    if (max >= 0 && max < std::max(min, fixed)) {
      return error(path, "maxItems is below minItems or the number of prefixItems");
    }
    if (!more_allowed) max = fixed;
    min = std::max<int64_t>(min - fixed, 0);
    if (max >= 0) max -= fixed;
    std::string body = "\"[\" ws";
    for (int64_t i = 0; i < fixed; ++i) body += (i ? " \",\" ws " : " ") + prefix[static_cast<size_t>(i)] + " ws";
    if (max != 0) {
      const std::string more = "( \",\" ws " + item + " ws )";
      const auto range = [](int64_t lo, int64_t hi) {
        return "{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "}";
      };
      if (fixed > 0) {
        body += " " + more + range(min, max);
      } else if (min == 0) {
        body += " ( " + item + " ws " + more + range(0, max < 0 ? -1 : max - 1) + " )?";
      } else {
        body += " " + item + " ws " + more + range(min - 1, max < 0 ? -1 : max - 1);
      }
    }
    body += " \"]\"";
    return add_rule(hint, body);
  }

  Result<std::string> object_expr(const ojson& s, const std::string& hint, const std::string& path, int depth) {
    struct Property {
      std::string key;  // as a GBNF literal of its JSON string
      std::string value;
      bool required;
    };
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return error(path, "required must be an array of names");
      for (const ojson& r : s["required"]) {
        if (!r.is_string()) return error(path, "required must be an array of names");
        required.insert(r.get<std::string>());
      }
    }
    std::vector<Property> props;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return error(path, "properties must be an object");
      for (const auto& [key, sub] : s["properties"].items()) {
        LG_ASSIGN_OR_RETURN(std::string value,
                            expr(sub, hint + "-" + rule_name(key), path + "/properties/" + key, depth + 1));
        props.push_back({literal(ojson(key).dump()), std::move(value), required.count(key) != 0});
        required.erase(key);
      }
    }
    if (!required.empty()) return error(path, "required names '" + *required.begin() + "', which is not in properties");
    // additionalProperties: absent or false = none (OpenAI strict mode's rule); true or a schema = more
    // members with any other name after the listed ones.
    std::string extra;
    if (s.contains("additionalProperties")) {
      const ojson& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) {
        LG_ASSIGN_OR_RETURN(std::string value, expr(a, hint + "-extra", path + "/additionalProperties", depth + 1));
        extra = add_rule(hint + "-extra-member", primitive("json-string") + " ws \":\" ws " + value + " ws");
      }
    }
    // rest(i, comma): the members from property i on, `comma` = one was written before.
    const size_t n = props.size();
    std::vector<std::array<std::string, 2>> rest(n + 1);
    rest[n][0] = extra.empty() ? "\"\"" : "( " + extra + " ( \",\" ws " + extra + " )* )?";
    rest[n][1] = extra.empty() ? "\"\"" : "( \",\" ws " + extra + " )*";
    for (size_t i = n; i-- > 0;) {
      for (int comma = 0; comma < 2; ++comma) {
        const Property& p = props[i];
        const std::string member = p.key + " ws \":\" ws " + p.value + " ws";
        std::vector<std::string> alts{(comma ? "\",\" ws " : "") + member + " " + rest[i + 1][1]};
        if (!p.required) alts.push_back(rest[i + 1][comma]);
        rest[i][comma] = add_rule(hint + "-from-" + std::to_string(i) + (comma ? "-c" : ""), gbnf_alternatives(alts));
      }
    }
    return add_rule(hint, "\"{\" ws " + rest[0][0] + " \"}\"");
  }

  const ojson& root_;
  JsonSchemaOptions options_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in order of creation
  std::map<std::string, std::string> primitives_;
  std::set<std::string> taken_{"root", "ws"};
  std::map<std::string, std::string> refs_;  // $ref -> rule name
  std::vector<std::pair<std::string, std::string>> patterns_;
};

// The bytes a pattern's text may hold unescaped inside a JSON string.
ByteSet json_string_safe_bytes() {
  ByteSet s;
  for (int b = 0x20; b < 256; ++b) s.set(static_cast<size_t>(b));
  s.reset('"');
  s.reset('\\');
  return s;
}

}  // namespace

Result<JsonSchemaGbnf> json_schema_to_gbnf(const ojson& schema, const JsonSchemaOptions& options) {
  return SchemaWriter(schema, options).write();
}

Result<Grammar> compile_json_schema(const ojson& schema, const JsonSchemaOptions& options) {
  LG_ASSIGN_OR_RETURN(JsonSchemaGbnf written, json_schema_to_gbnf(schema, options));
  LG_ASSIGN_OR_RETURN(Grammar g, parse_gbnf(written.gbnf, kMaxSchemaGbnfBytes));
  if (written.patterns.empty()) return g;
  // Splice each pattern's grammar in place of its placeholder rule. A
  // pattern's text sits inside a JSON string unescaped, so it may not
  // produce a quote, a backslash or a control byte: those are cut from its classes.
  std::vector<Rule> rules = g.rules();
  const ByteSet safe = json_string_safe_bytes();
  for (const auto& [placeholder_name, pattern] : written.patterns) {
    const std::string& name = placeholder_name;  // a plain reference: clang < 16 cannot capture a binding
    auto compiled = compile_regex(pattern);
    if (!compiled.is_ok()) {
      return Status::invalid_argument("json schema pattern '" + pattern + "': " + compiled.status().message());
    }
    const auto offset = static_cast<int32_t>(rules.size());
    for (Rule r : compiled->rules()) {
      for (Alternative& alt : r.alternatives) {
        for (Element& e : alt) {
          if (e.kind == Element::Kind::kRule) e.rule += offset;
          if (e.kind == Element::Kind::kBytes) e.bytes &= safe;
        }
      }
      r.name = name + "-" + r.name;
      rules.push_back(std::move(r));
    }
    const auto placeholder = std::find_if(rules.begin(), rules.end(), [&](const Rule& r) { return r.name == name; });
    placeholder->alternatives = {{Element::ref(offset + compiled->root())}};
  }
  return Grammar::make(std::move(rules), g.root());
}

Result<Grammar> json_value_grammar(JsonWhitespace whitespace, bool object_only) {
  JsonSchemaOptions options;
  options.whitespace = whitespace;
  return compile_json_schema(object_only ? ojson{{"type", "object"}, {"additionalProperties", true}} : ojson::object(),
                             options);
}

}  // namespace loragate::grammar

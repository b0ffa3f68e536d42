#include "grammar/schema_combinators.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "grammar/schema_values.h"

namespace loragate::grammar {
namespace {

using namespace schema_values;

// ---- allOf

// Folds allOf members into one schema. An intersection that allows no value
// comes back as `false` with the reason in `why_empty` (a caller may drop an
// anyOf branch for it, or make it an error); what cannot be merged exactly is an error.
class AllOfMerger {
 public:
  explicit AllOfMerger(const ResolveRef& resolve) : resolve_(resolve) {}

  Result<ojson> merge(const ojson& schema, std::string& why_empty) {
    const ojson& list = schema.at("allOf");
    if (!list.is_array() || list.empty()) return comb_error("allOf must be a non-empty array");
    // The siblings count as one member, before the allOf's members unless the
    // allOf comes first (property order follows the schema's text).
    ojson siblings = schema;
    siblings.erase("allOf");
    const bool all_of_first = schema.begin().key() == "allOf";
    std::vector<ojson> members;
    if (!all_of_first) members.push_back(siblings);
    for (const ojson& m : list) members.push_back(m);
    if (all_of_first) members.push_back(siblings);
    return merge_members(members, 0, 0, why_empty);
  }

 private:
  struct Part {
    ojson schema;  // an object without allOf or $ref, or false
    int refs;      // $ref hops taken to reach it
  };

  // The members without annotations; identical members once.
  static std::vector<ojson> distinct_members(const std::vector<ojson>& members) {
    std::vector<ojson> out;
    for (ojson m : members) {
      if (m.is_object()) {
        for (const std::string& a : schema_annotations()) m.erase(a);
        if (m.empty()) continue;
      }
      if (m.is_boolean() && m.get<bool>()) continue;
      if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(std::move(m));
    }
    return out;
  }

  // A schema the compiler would not read exactly as it stands: allOf, or
  // other keywords beside const / enum / anyOf (the compiler writes only those).
  static bool needs_rewrite(const ojson& s) {
    if (s.contains("allOf")) return true;
    size_t listing = 0;
    for (const char* k : {"const", "enum", "anyOf"}) listing += s.contains(k) ? 1 : 0;
    return listing > 0 && s.size() > 1;
  }

  Result<ojson> merge_members(const std::vector<ojson>& members, int depth, int refs, std::string& why_empty) {
    if (depth > kCombMaxDepth) return comb_error("nested deeper than " + std::to_string(kCombMaxDepth) + " levels");
    const std::vector<ojson> distinct = distinct_members(members);
    if (distinct.empty()) return ojson::object();
    // One member left (allOf [X], or [{$ref: A}, {$ref: A}]): it is the answer,
    // a $ref left unresolved, so that recursive schemas stay finite. Unless it
    // holds keywords the compiler would ignore (those beside const, enum, anyOf).
    if (distinct.size() == 1 && (!distinct[0].is_object() || !needs_rewrite(distinct[0]))) {
      if (comb_is_false(distinct[0])) why_empty = "a member is the schema false, which allows no value";
      return distinct[0];
    }
    std::vector<Part> parts;
    for (const ojson& m : distinct) LG_RETURN_IF_ERROR(flatten(m, refs, parts));
    return combine(parts, depth, why_empty);
  }

  // Appends the plain parts of `s`: its own keywords, its allOf members and
  // $ref targets, recursively.
  Status flatten(const ojson& s, int refs, std::vector<Part>& parts) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) parts.push_back({s, refs});
      return Status::ok();
    }
    if (!s.is_object()) return comb_error("a member must be an object or a boolean");
    if (s.contains("$ref")) {
      for (const auto& [key, unused] : s.items()) {
        if (key != "$ref" && schema_annotations().count(key) == 0) {
          return comb_error("'$ref' next to other keywords is not supported");
        }
      }
      if (refs >= kCombMaxRefs) {
        return comb_error("$ref followed more than " + std::to_string(kCombMaxRefs) + " levels deep (a recursive schema?)");
      }
      Status error;
      const ojson* target = comb_resolve(resolve_, s.at("$ref"), error);
      if (target == nullptr) return error;
      return flatten(*target, refs + 1, parts);
    }
    ojson own = s;
    own.erase("allOf");
    for (const std::string& a : schema_annotations()) own.erase(a);
    if (!own.empty()) parts.push_back({std::move(own), refs});
    if (s.contains("allOf")) {
      const ojson& list = s.at("allOf");
      if (!list.is_array() || list.empty()) return comb_error("allOf must be a non-empty array");
      for (const ojson& m : list) LG_RETURN_IF_ERROR(flatten(m, refs, parts));
    }
    return Status::ok();
  }

  // Several schemas that must all hold, as one (the schema itself when one).
  Result<ojson> conjunction(const std::vector<ojson>& list, int depth, int refs, std::string& why_empty) {
    if (list.size() == 1) {
      if (comb_is_false(list[0])) why_empty = "the schema false allows no value";
      return list[0];
    }
    return merge_members(list, depth + 1, refs, why_empty);
  }

  Result<ojson> combine(std::vector<Part>& parts, int depth, std::string& why_empty) {
    int refs = 0;
    std::vector<ojson> schemas;
    for (Part& p : parts) {
      if (comb_is_false(p.schema)) {
        why_empty = "a member is the schema false, which allows no value";
        return ojson(false);
      }
      refs = std::max(refs, p.refs);
      if (std::find(schemas.begin(), schemas.end(), p.schema) == schemas.end()) schemas.push_back(std::move(p.schema));
    }
    // Keys in order of first appearance; all must be understood.
    std::vector<std::string> keys;
    std::optional<ojson> any_of;
    for (const ojson& s : schemas) {
      for (const auto& [key, value] : s.items()) {
        if (comb_mergeable().count(key) == 0) return comb_error("keyword '" + key + "' is not supported");
        if (key == "anyOf") {
          if (!value.is_array() || value.empty()) return comb_error("'anyOf' must be a non-empty array");
          if (any_of && *any_of != value) {
            return comb_error("'anyOf' in more than one member is not supported (the cross product is not attempted)");
          }
          any_of = value;
          continue;
        }
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
    }
    const auto with = [&](const char* key) {
      std::vector<const ojson*> out;
      for (const ojson& s : schemas) {
        if (s.contains(key)) out.push_back(&s.at(key));
      }
      return out;
    };
    ojson out = ojson::object();

    // type: the intersection.
    unsigned atoms = kAtomAll;
    const ojson* first_type = nullptr;
    for (const ojson* t : with("type")) {
      LG_ASSIGN_OR_RETURN(const unsigned a, comb_type_atoms(*t));
      if ((atoms & a) == 0) {
        why_empty = "'type' " + comb_type_text(comb_type_json(atoms, *first_type)) + " and " + comb_type_text(*t) +
                    " leave no value";
        return ojson(false);
      }
      atoms &= a;
      if (first_type == nullptr) first_type = t;
    }
    if (first_type != nullptr) out["type"] = comb_type_json(atoms, *first_type);

    // enum / const: the values every member allows.
    std::optional<std::vector<ojson>> values;
    bool any_const = false;
    for (const ojson& s : schemas) {
      for (const char* key : {"const", "enum"}) {
        if (!s.contains(key)) continue;
        std::vector<ojson> allowed;
        if (std::string(key) == "const") {
          any_const = true;
          allowed.push_back(s.at(key));
        } else {
          const ojson& e = s.at(key);
          if (!e.is_array() || e.empty()) return comb_error("'enum' must be a non-empty array");
          allowed.assign(e.begin(), e.end());
        }
        if (!values) {
          values = allowed;
          continue;
        }
        std::erase_if(*values, [&](const ojson& v) {
          return std::none_of(allowed.begin(), allowed.end(), [&](const ojson& a) { return comb_json_equal(v, a); });
        });
        if (values->empty()) {
          why_empty = "the 'enum'/'const' values of the members have none in common";
          return ojson(false);
        }
      }
    }

    // Bounds: the tightest.
    for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      const bool lower = std::string(key).find("inimum") != std::string::npos;
      for (const ojson* b : with(key)) {
        if (!b->is_number()) return comb_error(std::string("'") + key + "' must be a number");
        if (!out.contains(key) || (lower ? comb_number(*b) > comb_number(out[key]) : comb_number(*b) < comb_number(out[key]))) {
          out[key] = *b;
        }
      }
    }
    for (const char* key : {"minLength", "minItems", "maxLength", "maxItems"}) {
      const bool lower = std::string(key).starts_with("min");
      for (const ojson* n : with(key)) {
        if (!n->is_number_integer() || comb_number(*n) < 0) {
          return comb_error(std::string("'") + key + "' must be a non-negative integer");
        }
        if (!out.contains(key) || (lower ? comb_number(*n) > comb_number(out[key]) : comb_number(*n) < comb_number(out[key]))) {
          out[key] = *n;
        }
      }
    }

    // multipleOf: one value only (the least common multiple is not attempted).
    for (const ojson* m : with("multipleOf")) {
      if (!m->is_number()) return comb_error("'multipleOf' must be a number");
      if (out.contains("multipleOf") && out["multipleOf"] != *m) return comb_error("cannot merge 'multipleOf' with 'multipleOf'");
      out["multipleOf"] = *m;
    }

    // pattern, format: one value only (two regexes do not intersect into one).
    for (const char* key : {"pattern", "format"}) {
      for (const ojson* p : with(key)) {
        if (!p->is_string()) return comb_error(std::string("'") + key + "' must be a string");
        if (out.contains(key) && out[key] != *p) {
          return comb_error(std::string("cannot merge '") + key + "' with '" + key + "'");
        }
        out[key] = *p;
      }
    }

    // required: the union.
    ojson required = ojson::array();
    for (const ojson* r : with("required")) {
      if (!r->is_array()) return comb_error("'required' must be an array of names");
      for (const ojson& name : *r) {
        if (!name.is_string()) return comb_error("'required' must be an array of names");
        if (std::find(required.begin(), required.end(), name) == required.end()) required.push_back(name);
      }
    }
    if (!with("required").empty()) out["required"] = required;

    LG_RETURN_IF_ERROR(merge_object(schemas, atoms, required, depth, refs, out, why_empty));
    if (!why_empty.empty()) return ojson(false);
    LG_RETURN_IF_ERROR(merge_array(schemas, depth, refs, out, keys));

    // In the order the keywords first appeared.
    ojson ordered = ojson::object();
    for (const std::string& key : keys) {
      if (out.contains(key)) ordered[key] = out[key];
    }

    if (values) {
      // The compiler writes an enum's values and ignores keywords beside it,
      // so the other keywords are applied here, value by value.
      ordered.erase("enum");
      ordered.erase("const");
      std::vector<ojson> kept;
      for (const ojson& v : *values) {
        LG_ASSIGN_OR_RETURN(const bool ok, comb_matches(v, ordered, resolve_, refs));
        if (ok) kept.push_back(v);
      }
      if (kept.empty()) {
        why_empty = "no 'enum'/'const' value passes the other keywords";
        return ojson(false);
      }
      ordered = ojson::object();
      if (kept.size() == 1 && any_const) {
        ordered["const"] = kept[0];
      } else {
        ordered["enum"] = ojson(kept);
      }
    }
    if (any_of) return distribute(*any_of, ordered, depth, refs, why_empty);
    return ordered;
  }

  // properties / additionalProperties. A name one member lists and another
  // does not meets that other member's additionalProperties; names nobody
  // lists meet every member's additionalProperties.
  Status merge_object(const std::vector<ojson>& schemas, unsigned atoms, const ojson& required, int depth, int refs,
                      ojson& out, std::string& why_empty) {
    std::vector<std::string> names;
    std::vector<ojson> extra;  // additionalProperties other than true
    bool extra_true = false;
    bool any = false;
    for (const ojson& s : schemas) {
      if (s.contains("properties")) {
        any = true;
        const ojson& p = s.at("properties");
        if (!p.is_object()) return comb_error("'properties' must be an object");
        for (const auto& [name, unused] : p.items()) {
          if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
        }
      }
      if (s.contains("additionalProperties")) {
        any = true;
        const ojson& a = s.at("additionalProperties");
        if (a.is_boolean() && a.get<bool>()) {
          extra_true = true;
        } else if (std::find(extra.begin(), extra.end(), a) == extra.end()) {
          extra.push_back(a);
        }
      }
    }
    if (!any) return Status::ok();
    ojson extra_out;  // null: absent
    if (std::any_of(extra.begin(), extra.end(), comb_is_false)) {
      extra_out = false;
    } else if (!extra.empty()) {
      std::string why;
      LG_ASSIGN_OR_RETURN(extra_out, conjunction(extra, depth, refs, why));
    } else if (extra_true) {
      extra_out = true;
    }
    const bool closed = comb_is_false(extra_out);
    const auto is_required = [&](const std::string& name) {
      return std::find(required.begin(), required.end(), ojson(name)) != required.end();
    };
    // A required name no value may take leaves no object: no value at all when
    // only objects are allowed, else a constraint this merge cannot write.
    const auto impossible_required = [&](const std::string& name, const std::string& why) -> Status {
      const std::string text = "property '" + name + "' is required, and " + why;
      if (atoms == kAtomObject) {
        why_empty = text;
        return Status::ok();
      }
      return comb_error(text);
    };
    ojson props = ojson::object();
    for (const std::string& name : names) {
      std::vector<ojson> list;
      for (const ojson& s : schemas) {
        if (s.contains("properties") && s.at("properties").contains(name)) {
          list.push_back(s.at("properties").at(name));
        } else if (s.contains("additionalProperties") && !(s.at("additionalProperties").is_boolean() &&
                                                           s.at("additionalProperties").get<bool>())) {
          list.push_back(s.at("additionalProperties"));
        }
      }
      std::string why;
      LG_ASSIGN_OR_RETURN(ojson merged, conjunction(list, depth, refs, why));
      if (comb_is_false(merged)) {
        if (is_required(name)) return impossible_required(name, why.empty() ? "a member forbids it" : why);
        if (closed) continue;  // forbidden already: no additional properties
      }
      props[name] = std::move(merged);
    }
    if (closed) {
      for (const ojson& r : required) {
        if (!props.contains(r.get<std::string>())) {
          return impossible_required(r.get<std::string>(), "additionalProperties false forbids it");
        }
      }
    }
    if (!names.empty()) out["properties"] = std::move(props);
    if (!extra_out.is_null()) out["additionalProperties"] = std::move(extra_out);
    return Status::ok();
  }

  // prefixItems / items. Element i meets every member's prefixItems[i], or
  // its items where its prefix is shorter. A position no element may take ends
  // the array there (maxItems).
  Status merge_array(const std::vector<ojson>& schemas, int depth, int refs, ojson& out, std::vector<std::string>& keys) {
    size_t n = 0;
    bool any_prefix = false;
    std::vector<ojson> items;  // other than true
    for (const ojson& s : schemas) {
      if (s.contains("prefixItems")) {
        if (!s.at("prefixItems").is_array()) return comb_error("'prefixItems' must be an array");
        any_prefix = true;
        n = std::max(n, s.at("prefixItems").size());
      }
      if (s.contains("items")) {
        const ojson& i = s.at("items");
        if (i.is_array()) return comb_error("'items' as an array is not supported (use prefixItems)");
        if (!(i.is_boolean() && i.get<bool>()) && std::find(items.begin(), items.end(), i) == items.end()) {
          items.push_back(i);
        }
      }
    }
    if (any_prefix) {
      ojson prefix = ojson::array();
      for (size_t k = 0; k < n; ++k) {
        std::vector<ojson> list;
        for (const ojson& s : schemas) {
          const bool own = s.contains("prefixItems") && k < s.at("prefixItems").size();
          if (own) {
            list.push_back(s.at("prefixItems")[k]);
          } else if (s.contains("items") && !(s.at("items").is_boolean() && s.at("items").get<bool>())) {
            list.push_back(s.at("items"));
          }
        }
        std::string why;
        LG_ASSIGN_OR_RETURN(ojson merged, conjunction(list, depth, refs, why));
        if (comb_is_false(merged)) {
          if (!out.contains("maxItems") || comb_number(out["maxItems"]) > static_cast<long double>(k)) {
            out["maxItems"] = k;
            if (std::find(keys.begin(), keys.end(), "maxItems") == keys.end()) keys.push_back("maxItems");
          }
          break;
        }
        prefix.push_back(std::move(merged));
      }
      if (prefix.empty()) {
        std::erase(keys, "prefixItems");
      } else {
        out["prefixItems"] = std::move(prefix);
      }
    }
    if (std::any_of(items.begin(), items.end(), comb_is_false)) {
      out["items"] = false;
    } else if (!items.empty()) {
      std::string why;
      LG_ASSIGN_OR_RETURN(out["items"], conjunction(items, depth, refs, why));
    } else if (std::find(keys.begin(), keys.end(), "items") != keys.end()) {
      out["items"] = true;
    }
    return Status::ok();
  }

  // anyOf beside other keywords: the compiler writes only the anyOf, so the
  // other keywords go into every branch; branches that then allow nothing go.
  Result<ojson> distribute(const ojson& any_of, const ojson& rest, int depth, int refs, std::string& why_empty) {
    if (rest.empty()) return ojson{{"anyOf", any_of}};
    ojson branches = ojson::array();
    for (const ojson& branch : any_of) {
      std::string why;
      LG_ASSIGN_OR_RETURN(ojson merged, merge_members({rest, branch}, depth + 1, refs, why));
      if (!comb_is_false(merged)) branches.push_back(std::move(merged));
    }
    if (branches.empty()) {
      why_empty = "no 'anyOf' branch is compatible with the other keywords";
      return ojson(false);
    }
    if (branches.size() == 1) return branches[0];
    return ojson{{"anyOf", std::move(branches)}};
  }

  const ResolveRef& resolve_;
};

}  // namespace

Result<nlohmann::ordered_json> merge_all_of(const nlohmann::ordered_json& schema, const ResolveRef& resolve) {
  if (!schema.is_object() || !schema.contains("allOf")) return comb_error("the schema holds no allOf");
  AllOfMerger merger(resolve);
  std::string why_empty;
  LG_ASSIGN_OR_RETURN(ojson merged, merger.merge(schema, why_empty));
  if (comb_is_false(merged)) return comb_error(why_empty.empty() ? "no value passes every member" : why_empty);
  return merged;
}

}  // namespace loragate::grammar

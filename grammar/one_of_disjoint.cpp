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

// ---- oneOf: proving branches apart

class OneOfProver {
 public:
  explicit OneOfProver(const ResolveRef& resolve) : resolve_(resolve) {}

  // The branch with $ref chains followed and allOf merged; nullopt when that
  // cannot be done (then nothing is proven about it).
  Result<std::optional<ojson>> settle(const ojson& branch) {
    ojson b = branch;
    for (int hops = 0; hops <= kCombMaxRefs; ++hops) {
      if (!b.is_object()) return std::optional<ojson>(b);
      if (b.contains("$ref")) {
        for (const auto& [key, unused] : b.items()) {
          if (key != "$ref" && schema_annotations().count(key) == 0) return std::optional<ojson>();
        }
        Status error;
        const ojson* target = comb_resolve(resolve_, b.at("$ref"), error);
        if (target == nullptr) return Status::invalid_argument("oneOf: " + error.message());
        b = *target;
        continue;
      }
      if (!b.contains("allOf")) return std::optional<ojson>(b);
      auto merged = merge_all_of(b, resolve_);
      if (!merged.is_ok()) return std::optional<ojson>();
      b = std::move(merged).value();
    }
    return std::optional<ojson>();
  }

  // The type atoms a branch may match: a superset (all when unknown).
  Result<unsigned> atoms(const ojson& b, int depth) {
    if (b.is_boolean()) return b.get<bool>() ? kAtomAll : 0u;
    if (!b.is_object() || depth > kCombMaxRefs) return kAtomAll;
    if (const std::optional<ojson> v = values(b)) {
      unsigned a = 0;
      for (const ojson& one : *v) a |= comb_value_atoms(one);
      return a;
    }
    if (b.contains("type")) {
      auto t = comb_type_atoms(b.at("type"));
      return t.is_ok() ? *t : kAtomAll;
    }
    if (b.contains("anyOf") && b.at("anyOf").is_array()) {
      unsigned a = 0;
      for (const ojson& sub : b.at("anyOf")) {
        LG_ASSIGN_OR_RETURN(const std::optional<ojson> s, settle(sub));
        if (!s) return kAtomAll;
        LG_ASSIGN_OR_RETURN(const unsigned sa, atoms(*s, depth + 1));
        a |= sa;
      }
      return a;
    }
    return kAtomAll;
  }

  // The values a branch may take when it lists them (const or enum): a
  // superset, as keywords beside them only narrow it.
  static std::optional<ojson> values(const ojson& b) {
    if (!b.is_object()) return std::nullopt;
    if (b.contains("const")) return ojson::array({b.at("const")});
    if (b.contains("enum") && b.at("enum").is_array()) return b.at("enum");
    return std::nullopt;
  }

  // True when no listed value of `a` matches `b`.
  bool values_miss(const ojson& a, const ojson& b) {
    const std::optional<ojson> v = values(a);
    if (!v) return false;
    for (const ojson& one : *v) {
      auto m = comb_matches(one, b, resolve_, 0);
      if (!m.is_ok() || *m) return false;
    }
    return true;
  }

  static bool plain_object_schema(const ojson& b) {
    if (!b.is_object()) return false;
    for (const auto& [key, unused] : b.items()) {
      if (schema_annotations().count(key) == 0 && comb_mergeable().count(key) == 0) return false;
    }
    // The compiler reads only const / enum / anyOf when present.
    return !b.contains("const") && !b.contains("enum") && !b.contains("anyOf") && !b.contains("allOf") &&
           !b.contains("$ref");
  }

  static std::vector<std::string> required_of(const ojson& b) {
    std::vector<std::string> out;
    if (!b.contains("required") || !b.at("required").is_array()) return out;
    for (const ojson& r : b.at("required")) {
      if (r.is_string()) out.push_back(r.get<std::string>());
    }
    return out;
  }

  static const ojson* property_of(const ojson& b, const std::string& name) {
    if (!b.contains("properties") || !b.at("properties").is_object()) return nullptr;
    const ojson& p = b.at("properties");
    return p.contains(name) ? &p.at(name) : nullptr;
  }

  // Objects of `a` always hold a name that objects of `b` may not have.
  static bool requires_what_other_forbids(const ojson& a, const ojson& b) {
    if (!b.contains("additionalProperties") || !comb_is_false(b.at("additionalProperties"))) return false;
    for (const std::string& name : required_of(a)) {
      if (property_of(b, name) == nullptr) return true;
    }
    return false;
  }

  Result<bool> objects_disjoint(const ojson& a, const ojson& b) {
    if (!plain_object_schema(a) || !plain_object_schema(b)) return false;
    if (requires_what_other_forbids(a, b) || requires_what_other_forbids(b, a)) return true;
    // A discriminator: a name both require, whose listed values in one match nothing in the other.
    const std::vector<std::string> rb = required_of(b);
    for (const std::string& name : required_of(a)) {
      if (std::find(rb.begin(), rb.end(), name) == rb.end()) continue;
      const ojson* pa = property_of(a, name);
      const ojson* pb = property_of(b, name);
      if (pa == nullptr || pb == nullptr) continue;
      LG_ASSIGN_OR_RETURN(const std::optional<ojson> sa, settle(*pa));
      LG_ASSIGN_OR_RETURN(const std::optional<ojson> sb, settle(*pb));
      if (!sa || !sb) continue;
      if (values_miss(*sa, *sb) || values_miss(*sb, *sa)) return true;
    }
    return false;
  }

  Result<bool> disjoint(const ojson& a, const ojson& b) {
    if (comb_is_false(a) || comb_is_false(b)) return true;
    LG_ASSIGN_OR_RETURN(const unsigned ua, atoms(a, 0));
    LG_ASSIGN_OR_RETURN(const unsigned ub, atoms(b, 0));
    const unsigned common = ua & ub;
    if (common == 0) return true;
    if (values_miss(a, b) || values_miss(b, a)) return true;
    if (common == kAtomObject) return objects_disjoint(a, b);
    return false;
  }

 private:
  const ResolveRef& resolve_;
};

}  // namespace

Result<bool> one_of_branches_disjoint(const nlohmann::ordered_json& branches, const ResolveRef& resolve) {
  if (!branches.is_array() || branches.empty()) return Status::invalid_argument("oneOf must be a non-empty array");
  OneOfProver prover(resolve);
  std::vector<ojson> settled;
  for (const ojson& b : branches) {
    LG_ASSIGN_OR_RETURN(const std::optional<ojson> s, prover.settle(b));
    if (!s) return false;
    settled.push_back(*s);
  }
  for (size_t i = 0; i < settled.size(); ++i) {
    for (size_t j = i + 1; j < settled.size(); ++j) {
      LG_ASSIGN_OR_RETURN(const bool d, prover.disjoint(settled[i], settled[j]));
      if (!d) return false;
    }
  }
  return true;
}

}  // namespace loragate::grammar

// JSON Schema combinators the grammar compiler cannot write directly,
// rewritten into schemas it can:
//  - merge_all_of folds `allOf` (with its sibling keywords, nested allOfs and
//    $ref members) into one schema that accepts exactly the intersection, or
//    fails naming the keyword it cannot merge exactly. Never looser.
//  - one_of_branches_disjoint proves that no JSON value matches two branches
//    of a `oneOf`, so that it may be compiled as `anyOf`. Never guesses:
//    false unless proven.
// Both read JSON Schema 2020-12 semantics (a keyword constrains only values of
// its type; `items` applies past `prefixItems`). $ref targets are found
// through the caller's ResolveRef, so refs stay absolute pointers into the
// caller's root and $defs are never moved.
// Pure functions; stateless; thread-safe.
#pragma once

#include <functional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace loragate::grammar {

// Keywords that only annotate: ignored by the compiler, dropped by a merge
// ($defs / definitions stay in the root, where refs point).
const std::set<std::string>& schema_annotations();

// The target of a "$ref" (e.g. "#/$defs/node") inside the root schema, or
// nullptr when it points at nothing.
using ResolveRef = std::function<const nlohmann::ordered_json*(const std::string& ref)>;

// `schema` is an object holding "allOf" (and perhaps other keywords beside
// it). Returns one schema without allOf at its top that accepts exactly the
// values every member (and the siblings) accepts. Annotations are dropped.
// Errors (invalid_argument, "allOf: ..."): members that leave no value
// ("allOf: 'type' string and integer leave no value"), keywords that cannot be
// merged exactly ("allOf: cannot merge 'pattern' with 'pattern'"), anyOf in
// more than one member, unsupported keywords, unresolvable or too deeply
// recursive $refs.
Result<nlohmann::ordered_json> merge_all_of(const nlohmann::ordered_json& schema, const ResolveRef& resolve);

// `branches` is the array of a "oneOf". True only when no JSON value can match
// two of them (then oneOf accepts what anyOf does); false when that is not
// proven. Errors only on malformed input (not a non-empty array, a $ref that
// points at nothing).
Result<bool> one_of_branches_disjoint(const nlohmann::ordered_json& branches, const ResolveRef& resolve);

}  // namespace loragate::grammar

// The JSON Schema helpers the combinators share (grammar/schema_combinators.h,
// implemented in all_of_merge.cpp and one_of_disjoint.cpp): types as sets of
// atoms ("number" is integer + fraction, so integer ∩ number = integer), JSON
// Schema equality of values (1 == 1.0, key order ignored), and whether a
// value matches a schema of the supported subset (used to filter enum values
// and to prove oneOf branches apart). Errors read "allOf: ...".
// Internal to grammar/; stateless; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "grammar/schema_combinators.h"

namespace loragate::grammar::schema_values {

using ojson = nlohmann::ordered_json;

inline constexpr int kCombMaxRefs = 16;   // $ref hops followed along one path (recursive schemas stop here)
inline constexpr int kCombMaxDepth = 64;  // nested merges, as the compiler's depth limit
inline constexpr unsigned kAtomNull = 1, kAtomBool = 2, kAtomObject = 4, kAtomArray = 8, kAtomString = 16,
                          kAtomInteger = 32, kAtomFraction = 64, kAtomAll = 127;

// Keywords a merge understands (the compiler's subset).
const std::set<std::string>& comb_mergeable();
Status comb_error(const std::string& what);
bool comb_is_false(const ojson& s);

// Type keywords and values as atom sets, and back.
std::optional<unsigned> comb_type_name_atoms(const std::string& name);
Result<unsigned> comb_type_atoms(const ojson& t);
bool comb_is_whole(double d);
unsigned comb_value_atoms(const ojson& v);
// `atoms` written as a type keyword, names in the order of `first` (the first member's type).
ojson comb_type_json(unsigned atoms, const ojson& first);
std::string comb_type_text(const ojson& t);

// Values: exact numbers, JSON Schema equality, string lengths in code points.
long double comb_number(const ojson& v);
bool comb_json_equal(const ojson& a, const ojson& b);
size_t comb_code_points(const std::string& s);

// The target of a {"$ref": ...} value, or nullptr with `error` set.
const ojson* comb_resolve(const ResolveRef& resolve, const ojson& ref_value, Status& error);
// Whether the value `v` matches schema `s` (2020-12 semantics, the supported
// subset). Errors where it cannot tell: pattern, format, unknown keywords.
Result<bool> comb_matches(const ojson& v, const ojson& s, const ResolveRef& resolve, int refs);

}  // namespace loragate::grammar::schema_values

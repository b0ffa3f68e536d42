// GBNF for the JSON numbers between two decimal bounds (JSON Schema's
// minimum / maximum / exclusiveMinimum / exclusiveMaximum, whole or with a
// fraction: 0.5, -1.25, 1e-3). A number is written as an optional "-", an
// integer part without leading zeros and, for `number`, an optional
// fraction of up to 16 digits; no exponent. The grammar holds exactly the
// numbers inside the bounds: integer parts strictly between the bounds take
// any fraction, and the fraction at a bound's integer part is compared digit
// by digit with the bound's (trailing zeros allowed: 0.50 is 0.5).
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace loragate::grammar {

// A finite decimal: -integer.fraction, digits without leading (integer) or
// trailing (fraction) zeros; zero is {false, "0", ""}.
struct Decimal {
  bool negative = false;
  std::string integer = "0";
  std::string fraction;
};

// Bounds have at most this many digits on each side of the point.
inline constexpr int kMaxBoundDigits = 16;

// A JSON number as a Decimal; refuses what has more than kMaxBoundDigits
// digits either side of the point (1e20, 1e-20).
Result<Decimal> decimal_from_json(const nlohmann::ordered_json& value);

struct NumberBound {
  Decimal value;
  bool inclusive = true;
};

// The GBNF expression for the numbers (`integer`: whole numbers only) x with
// lo <= x (lo < x when exclusive) and x <= hi, written with at most
// `fraction_digits` digits after the point; an absent bound does not bound.
// nullopt when no number lies between them.
std::optional<std::string> bounded_number_gbnf(const std::optional<NumberBound>& lo,
                                               const std::optional<NumberBound>& hi, bool integer,
                                               int fraction_digits = kMaxBoundDigits);

// The least whole number inside a lower bound, or the greatest inside an upper one.
int64_t whole_number_bound(const NumberBound& bound, bool lower);

// GBNF for the whole multiples of `step` (>= 1) between the bounds: an
// expression and the rules it names (named `prefix`-N). The multiples are
// listed when both bounds are given and at most kMaxListedMultiples lie
// between; without an upper (lower) bound the positive (negative) ones are
// recognised digit by digit, by the remainder so far (step <= kMaxOpenStep), and a
// finite bound on the other side may then only be below step in magnitude
// or list at most kMaxListedMultiples. Anything else is an error.
inline constexpr int64_t kMaxListedMultiples = 1024;
inline constexpr int64_t kMaxOpenStep = 100;  // its rules: a remainder and a digit count each
struct MultiplesGbnf {
  std::string expr;
  std::vector<std::pair<std::string, std::string>> rules;
};
Result<MultiplesGbnf> multiples_gbnf(int64_t step, const std::optional<NumberBound>& lo,
                                     const std::optional<NumberBound>& hi, const std::string& prefix);

// GBNF alternatives: `( a | b )`, or the one alternative alone.
std::string gbnf_alternatives(const std::vector<std::string>& alts);

}  // namespace loragate::grammar

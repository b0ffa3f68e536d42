#include "grammar/number_range.h"

#include <algorithm>
#include <cstdint>
#include <map>

namespace loragate::grammar {
namespace {

using ojson = nlohmann::ordered_json;

std::string digits_class(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(int from, int to) {
  return "[0-9]{" + std::to_string(from) + "," + std::to_string(to) + "}";
}

// GBNF alternatives for the decimal numbers in [a, b] that have exactly
// the digits of a and b (a and b as strings of equal length, leading zeros
// allowed past the first position).
void same_length_range(const std::string& a, const std::string& b, const std::string& prefix,
                       std::vector<std::string>& out) {
  if (a.empty()) {
    out.push_back(prefix.empty() ? "\"\"" : prefix);
    return;
  }
  const std::string rest_a = a.substr(1), rest_b = b.substr(1);
  const auto sep = [&](const std::string& p) { return p.empty() ? p : p + " "; };
  if (a[0] == b[0]) {
    same_length_range(rest_a, rest_b, sep(prefix) + digits_class(a[0], a[0]), out);
    return;
  }
  const bool low_full = rest_a.find_first_not_of('0') == std::string::npos;
  const bool high_full = rest_b.find_first_not_of('9') == std::string::npos;
  const auto fixed_digits = [&](size_t n) { return n == 0 ? std::string() : " [0-9]{" + std::to_string(n) + "}"; };
  const char lo_first = low_full ? a[0] : static_cast<char>(a[0] + 1);
  const char hi_first = high_full ? b[0] : static_cast<char>(b[0] - 1);
  if (!low_full) same_length_range(rest_a, std::string(rest_a.size(), '9'), sep(prefix) + digits_class(a[0], a[0]), out);
  if (lo_first <= hi_first) out.push_back(sep(prefix) + digits_class(lo_first, hi_first) + fixed_digits(rest_a.size()));
  if (!high_full) same_length_range(std::string(rest_b.size(), '0'), rest_b, sep(prefix) + digits_class(b[0], b[0]), out);
}

// The non-negative integers in [a, b] (b < 0: unbounded, up to kMaxBoundDigits digits), no leading zeros.
std::vector<std::string> natural_range(int64_t a, int64_t b) {
  std::vector<std::string> out;
  const std::string lo = std::to_string(a);
  const size_t max_len = b < 0 ? static_cast<size_t>(kMaxBoundDigits) : std::to_string(b).size();
  for (size_t len = lo.size(); len <= max_len; ++len) {
    const std::string first = len == lo.size() ? lo : "1" + std::string(len - 1, '0');
    std::string last = std::string(len, '9');
    if (b >= 0 && len == max_len) last = std::to_string(b);
    if (b < 0 && len > lo.size()) {  // every number of this length: one pattern for all longer lengths
      out.push_back("[1-9] [0-9]{" + std::to_string(len - 1) + "," + std::to_string(max_len - 1) + "}");
      break;
    }
    same_length_range(first, last, "", out);
  }
  return out;
}

// --- fractions: the digits after the point, compared with a bound's.

struct FractionBound {
  std::string digits;  // the bound's fraction digits (none: .0)
  bool inclusive = true;
  char first() const { return digits.empty() ? '0' : digits[0]; }
  FractionBound rest() const { return {digits.empty() ? "" : digits.substr(1), inclusive}; }
  bool zero() const { return digits.find_first_not_of('0') == std::string::npos; }
};

// Alternatives for the non-empty digit strings s of at most `left` digits
// with lo <= 0.s <= hi (strict where a bound is exclusive; a null bound does
// not bound); *empty_ok says whether the empty s (0) qualifies.
std::vector<std::string> fraction_alts(const FractionBound* lo, const FractionBound* hi, int left, bool* empty_ok) {
  *empty_ok = (lo == nullptr || (lo->zero() && lo->inclusive)) && (hi == nullptr || !hi->zero() || hi->inclusive);
  std::vector<std::string> alts;
  if (left == 0) return alts;
  if (lo == nullptr && hi == nullptr) return {any_digits(1, left)};
  // The digit `d`, then a rest bounded by what is left of the bounds.
  const auto follow = [&](char d, const FractionBound* next_lo, const FractionBound* next_hi) {
    bool rest_empty_ok = false;
    const std::vector<std::string> rest = fraction_alts(next_lo, next_hi, left - 1, &rest_empty_ok);
    const std::string head = digits_class(d, d);
    if (rest.empty()) {
      if (rest_empty_ok) alts.push_back(head);
      return;
    }
    const std::string tail = gbnf_alternatives(rest);
    alts.push_back(head + " " + (rest_empty_ok ? "( " + tail + " )?" : tail));
  };
  const char l = lo != nullptr ? lo->first() : '0';
  const char u = hi != nullptr ? hi->first() : '9';
  if (lo != nullptr && hi != nullptr && l >= u) {
    if (l == u) {
      const FractionBound next_lo = lo->rest(), next_hi = hi->rest();
      follow(l, &next_lo, &next_hi);
    }
    return alts;
  }
  if (lo != nullptr) {  // d == l: still at the lower bound (and below the upper one)
    const FractionBound next = lo->rest();
    follow(l, &next, nullptr);
  }
  const char from = lo != nullptr ? static_cast<char>(l + 1) : '0';
  const char to = hi != nullptr ? static_cast<char>(u - 1) : '9';
  if (from <= to) alts.push_back(digits_class(from, to) + (left > 1 ? " " + any_digits(0, left - 1) : ""));
  if (hi != nullptr) {  // d == u: still at the upper bound
    const FractionBound next = hi->rest();
    follow(u, nullptr, &next);
  }
  return alts;
}

// The fraction part after an integer part at the bounds: "" (none may
// follow), an optional or a required "." with digits, or nullopt (no
// fraction keeps the number inside).
std::optional<std::string> fraction_suffix(const FractionBound* lo, const FractionBound* hi, int digits) {
  bool empty_ok = false;
  const std::vector<std::string> alts = fraction_alts(lo, hi, digits, &empty_ok);
  if (alts.empty()) return empty_ok ? std::optional<std::string>("") : std::nullopt;
  const std::string body = "\".\" " + gbnf_alternatives(alts);
  return empty_ok ? " ( " + body + " )?" : " " + body;
}

// A bound on a magnitude (a number without its sign).
struct Magnitude {
  int64_t integer = 0;
  FractionBound fraction;
};

std::string integer_literal(int64_t i) { return "\"" + std::to_string(i) + "\""; }

// Alternatives for the magnitudes m (integer part, optional fraction of at
// most `digits` digits) with lo <= m <= hi.
void magnitudes(const std::optional<Magnitude>& lo, const std::optional<Magnitude>& hi, int digits,
                std::vector<std::string>& out) {
  if (lo && hi && lo->integer > hi->integer) return;
  if (lo && hi && lo->integer == hi->integer) {
    if (auto suffix = fraction_suffix(&lo->fraction, &hi->fraction, digits)) {
      out.push_back(integer_literal(lo->integer) + *suffix);
    }
    return;
  }
  if (lo) {
    if (auto suffix = fraction_suffix(&lo->fraction, nullptr, digits)) out.push_back(integer_literal(lo->integer) + *suffix);
  }
  const int64_t from = lo ? lo->integer + 1 : 0;
  const std::string any_fraction = digits == 0 ? "" : " ( \".\" " + any_digits(1, digits) + " )?";
  if (!hi) {
    out.push_back(gbnf_alternatives(natural_range(from, -1)) + any_fraction);
  } else if (from <= hi->integer - 1) {
    out.push_back(gbnf_alternatives(natural_range(from, hi->integer - 1)) + any_fraction);
  }
  if (hi) {
    if (auto suffix = fraction_suffix(nullptr, &hi->fraction, digits)) out.push_back(integer_literal(hi->integer) + *suffix);
  }
}

Magnitude magnitude_of(const NumberBound& b) {
  return {std::stoll(b.value.integer), {b.value.fraction, b.inclusive}};
}

}  // namespace

int64_t whole_number_bound(const NumberBound& b, bool lower) {
  const int64_t i = std::stoll(b.value.integer);
  const int64_t signed_i = b.value.negative ? -i : i;
  if (b.value.fraction.empty()) return b.inclusive ? signed_i : signed_i + (lower ? 1 : -1);
  // Between two whole numbers: the one on the inside (toward zero for negatives going up).
  if (lower) return b.value.negative ? signed_i : signed_i + 1;
  return b.value.negative ? signed_i - 1 : signed_i;
}

namespace {

// Whole numbers in [lo, hi] (an absent bound does not bound).
std::vector<std::string> integer_alts(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (lo && hi && *lo > *hi) return alts;
  if (!hi || *hi >= 0) {  // x >= 0
    const std::vector<std::string> parts = natural_range(lo && *lo > 0 ? *lo : 0, hi ? *hi : -1);
    alts.push_back(gbnf_alternatives(parts));
  }
  if (!lo || *lo < 0) {  // x < 0: "-" and a magnitude in [max(-hi, 1), -lo]
    const int64_t from = hi && *hi < 0 ? -*hi : 1;
    alts.push_back("\"-\" " + gbnf_alternatives(natural_range(from, lo ? -*lo : -1)));
  }
  return alts;
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// The positive multiples of `step` of at most kMaxBoundDigits digits, no
// leading zeros (bounded like every number here, so that a sequence that
// keeps writing digits still ends). Rule `prefix`-r-n takes n digits or
// fewer that bring remainder r to 0; the rules that can are the ones written.
std::string positive_multiples(int64_t step, const std::string& prefix, MultiplesGbnf* out) {
  const int kDigits = kMaxBoundDigits;
  const auto state = [&](int64_t r, int n) { return prefix + "-" + std::to_string(r) + "-" + std::to_string(n); };
  // reachable[n][r]: some n digits or fewer bring remainder r to 0.
  std::vector<std::vector<bool>> reachable(kDigits, std::vector<bool>(static_cast<size_t>(step), false));
  const auto next = [&](int64_t r, char d) { return (r * 10 + (d - '0')) % step; };
  // The steps from remainder r with n digits left, grouped by where they go.
  const auto steps_from = [&](int64_t r, int n, char first_digit) {
    std::map<int64_t, std::string> digits_to;
    for (char d = first_digit; d <= '9'; ++d) {
      if (reachable[static_cast<size_t>(n - 1)][static_cast<size_t>(next(r, d))]) digits_to[next(r, d)] += d;
    }
    std::vector<std::string> alts;
    for (const auto& [to, digits] : digits_to) {
      alts.push_back((digits.size() == 1 ? "\"" + digits + "\"" : "[" + digits + "]") + " " + state(to, n - 1));
    }
    return alts;
  };
  // The rules are written once, for the positive and the negative multiples both.
  const bool write = out->rules.empty();
  reachable[0][0] = true;
  if (write) out->rules.emplace_back(state(0, 0), "\"\"");
  for (int n = 1; n < kDigits; ++n) {
    for (int64_t r = 0; r < step; ++r) {
      std::vector<std::string> alts = steps_from(r, n, '0');
      if (r == 0) alts.push_back("\"\"");
      if (alts.empty()) continue;
      reachable[static_cast<size_t>(n)][static_cast<size_t>(r)] = true;
      if (write) out->rules.emplace_back(state(r, n), gbnf_alternatives(alts));
    }
  }
  return gbnf_alternatives(steps_from(0, kDigits, '1'));
}

}  // namespace

Result<MultiplesGbnf> multiples_gbnf(int64_t step, const std::optional<NumberBound>& lo,
                                     const std::optional<NumberBound>& hi, const std::string& prefix) {
  // Plain values beside flags (an optional<int64_t> here trips GCC's maybe-uninitialized).
  const bool has_low = lo.has_value(), has_high = hi.has_value();
  const int64_t low = has_low ? whole_number_bound(*lo, true) : 0;
  const int64_t high = has_high ? whole_number_bound(*hi, false) : 0;
  MultiplesGbnf out;
  std::vector<std::string> alts;
  // The multiples in [a, b], listed (false when there are too many).
  const auto list = [&](int64_t a, int64_t b) {
    const int64_t first = -floor_div(-a, step) * step, last = floor_div(b, step) * step;
    if (first <= last && (last - first) / step >= kMaxListedMultiples) return false;
    for (int64_t m = first; m <= last; m += step) alts.push_back("\"" + std::to_string(m) + "\"");
    return true;
  };
  const std::string too_many = "multipleOf " + std::to_string(step) + ": more than " +
                               std::to_string(kMaxListedMultiples) + " multiples between the bounds";
  if (has_low && has_high) {
    if (!list(low, high)) return Status::invalid_argument(too_many);
  } else {
    if (step > kMaxOpenStep) {
      return Status::invalid_argument("multipleOf " + std::to_string(step) + " above " + std::to_string(kMaxOpenStep) +
                                      " needs both bounds");
    }
    if (!has_high) {  // the positive multiples, and those in [low, 0]
      if (has_low && low > step) {
        return Status::invalid_argument("multipleOf with a lower bound above the step needs an upper bound too");
      }
      alts.push_back(positive_multiples(step, prefix, &out));
      if (!list(has_low ? low : 0, 0)) return Status::invalid_argument(too_many);
    }
    if (!has_low) {  // the negative multiples, and those in [0, high]
      if (has_high && high < -step) {
        return Status::invalid_argument("multipleOf with an upper bound below minus the step needs a lower bound too");
      }
      alts.push_back("\"-\" " + positive_multiples(step, prefix, &out));
      if (has_high && !list(0, high)) return Status::invalid_argument(too_many);
    }
  }
  if (alts.empty()) return Status::invalid_argument("no multiple of " + std::to_string(step) + " lies between the bounds");
  out.expr = gbnf_alternatives(alts);
  return out;
}

std::string gbnf_alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts.front();
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

Result<Decimal> decimal_from_json(const ojson& value) {
  if (!value.is_number()) return Status::invalid_argument("must be a number");
  // The shortest text that reads back as the value ("0.1", "1e-05", "-12").
  const std::string text = value.dump();
  Decimal d;
  size_t at = 0;
  if (text[at] == '-') {
    d.negative = true;
    ++at;
  }
  std::string digits;  // all mantissa digits; the point sits after `point` of them
  size_t point = std::string::npos;
  for (; at < text.size() && text[at] != 'e' && text[at] != 'E'; ++at) {
    if (text[at] == '.') {
      point = digits.size();
    } else {
      digits += text[at];
    }
  }
  if (point == std::string::npos) point = digits.size();
  int64_t exponent = 0;
  if (at < text.size()) exponent = std::stoll(text.substr(at + 1));
  const int64_t shifted = static_cast<int64_t>(point) + exponent;
  if (shifted > kMaxBoundDigits || shifted < -kMaxBoundDigits) {
    return Status::invalid_argument(text + " has more than " + std::to_string(kMaxBoundDigits) +
                                    " digits before or after the point");
  }
  if (shifted <= 0) {
    digits.insert(0, static_cast<size_t>(-shifted) + 1, '0');
    point = 1;
  } else {
    if (static_cast<size_t>(shifted) > digits.size()) digits.append(static_cast<size_t>(shifted) - digits.size(), '0');
    point = static_cast<size_t>(shifted);
  }
  d.integer = digits.substr(0, point);
  d.fraction = digits.substr(point);
  d.integer.erase(0, std::min(d.integer.find_first_not_of('0'), d.integer.size() - 1));
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  if (d.fraction.size() > static_cast<size_t>(kMaxBoundDigits) || d.integer.size() > static_cast<size_t>(kMaxBoundDigits)) {
    return Status::invalid_argument(text + " has more than " + std::to_string(kMaxBoundDigits) +
                                    " digits before or after the point");
  }
  if (d.integer == "0" && d.fraction.empty()) d.negative = false;  // -0 is 0
  return d;
}

std::optional<std::string> bounded_number_gbnf(const std::optional<NumberBound>& lo,
                                               const std::optional<NumberBound>& hi, bool integer,
                                               int fraction_digits) {
  std::vector<std::string> alts;
  if (integer) {
    alts = integer_alts(lo ? std::optional<int64_t>(whole_number_bound(*lo, true)) : std::nullopt,
                        hi ? std::optional<int64_t>(whole_number_bound(*hi, false)) : std::nullopt);
  } else {
    if (!hi || !hi->value.negative) {  // x >= 0: its magnitude between lo (when not negative) and hi
      std::optional<Magnitude> m_lo, m_hi;
      if (lo && !lo->value.negative) m_lo = magnitude_of(*lo);
      if (hi) m_hi = magnitude_of(*hi);
      magnitudes(m_lo, m_hi, fraction_digits, alts);
    }
    if (!lo || lo->value.negative) {  // x < 0: "-" and a magnitude above 0 (or |hi|), up to |lo|
      Magnitude m_lo{0, {"", /*inclusive=*/false}};
      if (hi && hi->value.negative) m_lo = magnitude_of(*hi);
      std::optional<Magnitude> m_hi;
      if (lo) m_hi = magnitude_of(*lo);
      std::vector<std::string> negative;
      magnitudes(m_lo, m_hi, fraction_digits, negative);
      for (const std::string& m : negative) alts.push_back("\"-\" " + m);
    }
  }
  if (alts.empty()) return std::nullopt;
  return gbnf_alternatives(alts);
}

}  // namespace loragate::grammar

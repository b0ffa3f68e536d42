// JSON Schema -> Grammar: the language of each compiled schema, checked by
// running the matcher over documents that must and must not match (strict
// objects, optional properties in order, enum/const/anyOf, recursive $ref,
// arrays, string lengths/patterns/formats, integer and number bounds checked
// exhaustively over a range), the whitespace policy, and refusals naming
// the keyword.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>

#include "grammar/matcher.h"

namespace loragate::grammar {
namespace {

using ojson = nlohmann::ordered_json;

std::shared_ptr<const Grammar> schema_grammar(const std::string& schema,
                                              JsonWhitespace ws = JsonWhitespace::kCompact) {
  JsonSchemaOptions o;
  o.whitespace = ws;
  auto g = compile_json_schema(ojson::parse(schema), o);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  if (!g.is_ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

void expect_language(const std::string& schema, const std::vector<std::string>& yes, const std::vector<std::string>& no,
                     JsonWhitespace ws = JsonWhitespace::kCompact) {
  const auto g = schema_grammar(schema, ws);
  ASSERT_NE(g, nullptr);
  for (const std::string& doc : yes) EXPECT_TRUE(grammar_matches(g, doc)) << schema << " should accept " << doc;
  for (const std::string& doc : no) EXPECT_FALSE(grammar_matches(g, doc)) << schema << " should refuse " << doc;
}

std::string schema_error(const std::string& schema) {
  auto g = compile_json_schema(ojson::parse(schema), {});
  return g.is_ok() ? std::string("(compiled)") : g.status().message();
}

TEST(JsonSchemaTest, StrictObjectsInSchemaOrder) {
  expect_language(
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},
          "required":["name","age"],"additionalProperties":false})",
      {R"({"name":"Al","age":42})", R"({"name":"Zo\u00eb \"Q\"","age":0})", R"({"name":"","age":150})"},
      {R"({"age":42,"name":"Al"})", R"({"name":"Al","age":151})", R"({"name":"Al"})",
       R"({"name":"Al","age":42,"x":1})", R"({"name":"Al","age":-1})", R"({"name":"Al","age":042})"});
}

TEST(JsonSchemaTest, OptionalPropertiesKeepCommasRight) {
  expect_language(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},
                     "required":["b"]})",
                  {R"({"b":1})", R"({"a":1,"b":2})", R"({"b":1,"c":2})", R"({"a":1,"b":2,"c":3})"},
                  {"{}", R"({"a":1})", R"({,"b":1})", R"({"b":1,})", R"({"a":1,"c":3})"});
  expect_language(R"({"type":"object","properties":{"a":{"type":"integer"}}})", {"{}", R"({"a":7})"}, {R"({"b":7})"});
  expect_language(R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"boolean"}})",
                  {"{}", R"({"a":7,"x":true})", R"({"x":false,"y":true})"}, {R"({"x":1})"});
}

TEST(JsonSchemaTest, EnumConstAnyOfAndTypeLists) {
  expect_language(R"({"enum":["red","green",3,null]})", {R"("red")", "3", "null"}, {R"("blue")", "4"});
  expect_language(R"({"const":{"k":[1,"two"]}})", {R"({"k":[1,"two"]})"}, {R"({"k":[1]})"});
  expect_language(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})", {"12", R"("ab")"},
                  {R"("abc")", "1.5"});
  expect_language(R"({"type":["string","null"]})", {R"("x")", "null"}, {"1"});
  expect_language(R"({"type":"boolean"})", {"true", "false"}, {"1", "\"true\""});
}

TEST(JsonSchemaTest, RecursiveReferences) {
  expect_language(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                        "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"],
                        "additionalProperties":false}},"$ref":"#/$defs/node"})",
                  {R"({"v":1,"kids":[]})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]},{"v":4,"kids":[]}]})"},
                  {R"({"v":1,"kids":[{"v":2}]})", R"({"v":1})"});
  EXPECT_NE(schema_error(R"({"$ref":"#/$defs/missing"})").find("points at nothing"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"https://example.com/s.json"})").find("only references inside"), std::string::npos);
}

TEST(JsonSchemaTest, ArraysCountTheirItems) {
  expect_language(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})", {"[1,2]", "[1,2,3]"},
                  {"[]", "[1]", "[1,2,3,4]", "[1,,2]", "[1,2,]"});
  expect_language(R"({"type":"array","items":{"type":"integer"}})", {"[]", "[5]", "[1,2,3,4,5,6]"}, {"[1 2]"});
  expect_language(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
                  {R"(["a",1])"}, {R"(["a"])", R"(["a",1,2])", R"([1,"a"])"});
  expect_language(R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"boolean"},"maxItems":3})",
                  {R"(["a"])", R"(["a",true,false])"}, {R"(["a",true,false,true])", R"(["a",1])"});
}

TEST(JsonSchemaTest, StringsLengthsPatternsAndFormats) {
  expect_language(R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("a\nb")", R"("éèê")"},
                  {R"("a")", R"("abcd")"});
  expect_language(R"({"type":"string","pattern":"^[a-z]+\\d$"})", {R"("abc1")"}, {R"("abc")", R"("1")", R"("ab"1")"});
  expect_language(R"({"type":"string","format":"date"})", {R"("2026-12-03")"}, {R"("2026-13-03")", R"("26-12-03")"});
  expect_language(R"({"type":"string","format":"date-time"})", {R"("2026-12-03T15:04:05Z")", R"("2026-12-03T15:04:05.123+01:00")"},
                  {R"("2026-12-03 15:04:05Z")", R"("2026-12-03T25:04:05Z")"});
  expect_language(R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
                  {R"("123e4567e89b12d3a456426614174000")"});
  expect_language(R"({"type":"string","format":"email"})", {R"("a.b+c@example.co.uk")"}, {R"("a@b")", R"("@x.com")"});
  expect_language(R"({"type":"string","format":"email"})",
                  {R"("x_y-z%1@a-b.c9.io")", "\"" + std::string(32, 'a') + "." + std::string(10, 'b') + "@x.io\""},
                  {R"(".a@x.io")", R"("a.@x.io")", R"("a..b@x.io")", R"("a@-x.io")", R"("a@x-.io")", R"("a@x..io")",
                   "\"" + std::string(65, 'a') + "@x.io\""});
  expect_language(R"({"type":"string","format":"hostname"})", {R"("a")", R"("api-2.example.com")", R"("x1.y2")"},
                  {R"("-a.com")", R"("a-.com")", R"("a..b")", R"(".a")", R"("a_b.com")"});
  expect_language(R"({"type":"string","format":"ipv4"})", {R"("0.0.0.0")", R"("255.255.255.255")", R"("10.1.20.199")"},
                  {R"("256.1.1.1")", R"("01.1.1.1")", R"("1.1.1")", R"("1.1.1.1.1")"});
  expect_language(R"({"type":"string","format":"ipv6"})", {R"("2001:db8:0:0:0:ff00:42:8329")"},
                  {R"("2001:db8::1")", R"("12345:0:0:0:0:0:0:0")", R"("1:2:3:4:5:6:7")"});
  expect_language(R"({"type":"string","format":"duration"})", {R"("P1Y2M3DT4H5M6S")", R"("PT30M")", R"("P2W")", R"("P3D")"},
                  {R"("P")", R"("PT")", R"("P1H")", R"("P1Y2W")", R"("1D")"});
  EXPECT_NE(schema_error(R"({"type":"string","format":"uri"})").find("format 'uri'"), std::string::npos);
}

// Every day of every month, over years that cover the leap rules (÷4, ÷100,
// ÷400) and the smallest years, against the calendar's own arithmetic.
TEST(JsonSchemaTest, DatesAreCalendarDates) {
  const auto g = schema_grammar(R"({"type":"string","format":"date"})");
  ASSERT_NE(g, nullptr);
  auto leap = [](int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; };
  const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  std::vector<int> years = {0, 1, 4, 100, 400, 1600, 1700, 1900, 2000, 2100, 2400, 9996, 9999};
  for (int y = 2019; y <= 2025; ++y) years.push_back(y);
  for (int y : years) {
    for (int m = 0; m <= 13; ++m) {
      for (int d = 0; d <= 32; ++d) {
        char text[32];
        std::snprintf(text, sizeof text, "\"%04d-%02d-%02d\"", y, m, d);
        const bool valid = y >= 1 && m >= 1 && m <= 12 && d >= 1 &&
                           d <= kDays[std::clamp(m, 1, 12) - 1] + (m == 2 && leap(y) ? 1 : 0);
        EXPECT_EQ(grammar_matches(g, text), valid) << text;
      }
    }
  }
}

TEST(JsonSchemaTest, IntegerBoundsAreExactOverARange) {
  for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{-37, 1234}, {0, 9}, {5, 5}, {-120, -8}, {10, 99}}) {
    const std::string schema =
        R"({"type":"integer","minimum":)" + std::to_string(lo) + R"(,"maximum":)" + std::to_string(hi) + "}";
    const auto g = schema_grammar(schema);
    ASSERT_NE(g, nullptr);
    for (int v = -1500; v <= 1500; ++v) {
      ASSERT_EQ(grammar_matches(g, std::to_string(v)), v >= lo && v <= hi) << schema << " " << v;
    }
    EXPECT_FALSE(grammar_matches(g, "-0"));
    EXPECT_FALSE(grammar_matches(g, "007"));
  }
  const auto open_above = schema_grammar(R"({"type":"integer","exclusiveMinimum":-3})");
  for (int v = -50; v <= 5000; v += 7) EXPECT_EQ(grammar_matches(open_above, std::to_string(v)), v > -3) << v;
  EXPECT_TRUE(grammar_matches(open_above, "1234567890123456"));
  const auto below = schema_grammar(R"({"type":"integer","maximum":-20})");
  for (int v = -5000; v <= 50; v += 3) EXPECT_EQ(grammar_matches(below, std::to_string(v)), v <= -20) << v;
}

TEST(JsonSchemaTest, NumberBoundsHoldForFractions) {
  expect_language(R"({"type":"number","minimum":-5,"maximum":10})",
                  {"-5", "-5.0", "-4.99", "0", "-0.5", "3.14", "10", "10.000", "9.999"},
                  {"-5.01", "-6", "10.5", "11", "1e3"});
  expect_language(R"({"type":"number","minimum":2})", {"2", "2.5", "300.25"}, {"1.99", "-2"});
  expect_language(R"({"type":"number","maximum":-2})", {"-2", "-2.0", "-3.5", "-100"}, {"-1.5", "0", "-2.5e1"});
}

// The number k/1000 as JSON writes it: "-1.25" (every fraction digit it
// has, trailing zeros kept when `padded`: "-1.250").
std::string thousandths(int k, bool padded) {
  std::string out = k < 0 ? "-" : "";
  const int m = std::abs(k);
  out += std::to_string(m / 1000);
  std::string fraction = std::to_string(1000 + m % 1000).substr(1);
  if (!padded) {
    while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  }
  return fraction.empty() ? out : out + "." + fraction;
}

// Fractional and exclusive bounds, on numbers and integers: every multiple
// of 0.001 over a range (written both ways) is inside exactly when the
// arithmetic says so.
TEST(JsonSchemaTest, DecimalBoundsAreExact) {
  struct Case {
    const char* keywords;  // the bounds, as JSON
    int lo, hi;            // in thousandths; kNone = unbounded
    bool lo_in, hi_in;
  };
  constexpr int kNone = 1 << 30;
  const std::vector<Case> cases = {
      {R"("minimum":0.5,"maximum":2.25)", 500, 2250, true, true},
      {R"("exclusiveMinimum":-2.35,"exclusiveMaximum":-0.05)", -2350, -50, false, false},
      {R"("exclusiveMinimum":0)", 0, kNone, false, true},
      {R"("exclusiveMaximum":0)", -kNone, 0, true, false},
      {R"("minimum":-1.125,"exclusiveMaximum":1.125)", -1125, 1125, true, false},
      {R"("minimum":0.25,"maximum":0.75)", 250, 750, true, true},
      {R"("minimum":1.2,"maximum":1.2)", 1200, 1200, true, true},
      {R"("minimum":0.001,"exclusiveMaximum":0.002)", 1, 2, true, false},
      {R"("minimum":-0.5,"exclusiveMinimum":-0.5,"maximum":3)", -500, 3000, false, true},
      {R"("maximum":-1.5)", -kNone, -1500, true, true},
  };
  for (const Case& c : cases) {
    for (const char* type : {"number", "integer"}) {
      const std::string schema = std::string(R"({"type":")") + type + "\"," + c.keywords + "}";
      const bool integer = type == std::string("integer");
      const auto inside = [&](int k) {
        const bool above = c.lo == -kNone || (c.lo_in ? k >= c.lo : k > c.lo);
        const bool below = c.hi == kNone || (c.hi_in ? k <= c.hi : k < c.hi);
        return above && below;
      };
      if (integer && c.lo != -kNone && c.hi != kNone) {
        bool any = false;
        for (int k = c.lo - c.lo % 1000 - 1000; k <= c.hi; k += 1000) any = any || inside(k);
        if (!any) {  // no whole number between the bounds: refused, not a grammar of nothing
          EXPECT_NE(schema_error(schema).find("leave no number"), std::string::npos) << schema;
          continue;
        }
      }
      const auto g = schema_grammar(schema);
      ASSERT_NE(g, nullptr) << schema;
      for (int k = -4000; k <= 4000; ++k) {
        if (integer && k % 1000 != 0) continue;
        ASSERT_EQ(grammar_matches(g, thousandths(k, false)), inside(k)) << schema << " " << thousandths(k, false);
        if (!integer && k % 1000 != 0) {
          ASSERT_EQ(grammar_matches(g, thousandths(k, true)), inside(k)) << schema << " " << thousandths(k, true);
        }
      }
    }
  }
  expect_language(R"({"type":"number","minimum":0.1})", {"0.1", "0.1000000000000001", "0.2"}, {"0.0999999999999999"});
  EXPECT_NE(schema_error(R"({"type":"number","minimum":1e-20})").find("more than 16 digits"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"number","minimum":1.5,"exclusiveMaximum":1.5})").find("leave no number"),
            std::string::npos);
}

// multipleOf: whole steps digit by digit (by the remainder so far), listed
// between two bounds, or a power of ten limiting the digits after the point.
TEST(JsonSchemaTest, MultipleOfIsExact) {
  struct Case {
    std::string schema;
    int step;
    int lo, hi;  // inclusive; kOpen = unbounded
  };
  constexpr int kOpen = 1 << 30;
  const std::vector<Case> cases = {
      {R"({"type":"integer","multipleOf":7})", 7, -kOpen, kOpen},
      {R"({"type":"integer","multipleOf":12,"minimum":0})", 12, 0, kOpen},
      {R"({"type":"integer","multipleOf":5,"exclusiveMinimum":-40})", 5, -39, kOpen},
      {R"({"type":"number","multipleOf":3,"exclusiveMaximum":0})", 3, -kOpen, -1},
      {R"({"type":"integer","multipleOf":25,"minimum":-130,"maximum":990})", 25, -130, 990},
      {R"({"multipleOf":100})", 100, -kOpen, kOpen},
  };
  for (const Case& c : cases) {
    const auto g = schema_grammar(c.schema);
    ASSERT_NE(g, nullptr) << c.schema;
    for (int v = -1500; v <= 1500; ++v) {
      const bool inside = v % c.step == 0 && (c.lo == -kOpen || v >= c.lo) && (c.hi == kOpen || v <= c.hi);
      ASSERT_EQ(grammar_matches(g, std::to_string(v)), inside) << c.schema << " " << v;
    }
    EXPECT_FALSE(grammar_matches(g, "-0")) << c.schema;
    EXPECT_FALSE(grammar_matches(g, "014")) << c.schema;
  }
  // At most 16 digits, as every number the grammars write.
  expect_language(R"({"type":"integer","multipleOf":7})", {std::string(16, '7')}, {std::string(17, '7')});
  EXPECT_NE(schema_error(R"({"type":"integer","multipleOf":1000})").find("needs both bounds"), std::string::npos);
  expect_language(R"({"type":"number","multipleOf":0.01,"minimum":0,"maximum":10})",
                  {"0", "9.99", "10", "10.00", "0.5", "3.14"}, {"3.141", "10.01", "-0.01", "1e1"});
  expect_language(R"({"type":"number","multipleOf":0.1})", {"-2.5", "7", "12345.6"}, {"0.25", "1e2"});
  EXPECT_NE(schema_error(R"({"type":"number","multipleOf":1.5})").find("power of ten"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"integer","multipleOf":0})").find("above 0"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"integer","multipleOf":3,"minimum":0,"maximum":100000})").find("more than 1024"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"integer","multipleOf":3,"minimum":10})").find("upper bound"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"integer","multipleOf":5,"minimum":1,"maximum":4})").find("no multiple"),
            std::string::npos);
}

// allOf is merged into one schema; const/enum/anyOf obey the keywords beside
// them; oneOf compiles where its branches are provably disjoint.
TEST(JsonSchemaTest, CombinatorsAreExact) {
  expect_language(R"({"allOf":[{"type":"integer"},{"minimum":1},{"maximum":3}]})", {"1", "3"}, {"0", "4", "1.5"});
  expect_language(R"({"type":"object","allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},
                     {"properties":{"b":{"type":"string","maxLength":2}},"required":["b"]}]})",
                  {R"({"a":1,"b":"xy"})"}, {R"({"a":1})", R"({"b":"x"})", R"({"a":1,"b":"xyz"})"});
  expect_language(R"({"type":"string","enum":["a",1,"b"]})", {R"("a")", R"("b")"}, {"1"});
  expect_language(R"({"anyOf":[{"type":"integer"},{"type":"string"}],"maxLength":1,"minimum":5})",
                  {"5", "99", R"("x")"}, {"4", R"("xy")"});
  expect_language(R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},
                                "required":["kind","x"],"additionalProperties":false},
                               {"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"boolean"}},
                                "required":["kind","y"],"additionalProperties":false}]})",
                  {R"({"kind":"a","x":1})", R"({"kind":"b","y":true})"}, {R"({"kind":"a","y":true})"});
  expect_language(R"({"oneOf":[{"type":"string"},{"type":"integer"}]})", {R"("s")", "7"}, {"true"});
  EXPECT_NE(schema_error(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})").find("oneOf"), std::string::npos);
  EXPECT_NE(schema_error(R"({"oneOf":[{"minimum":1},{"maximum":5}]})").find("oneOf"), std::string::npos);
}

TEST(JsonSchemaTest, WhitespacePolicy) {
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},
                                 "required":["a"],"additionalProperties":false})";
  expect_language(schema, {R"({"a":[1,2]})"}, {R"({ "a": [1, 2] })"});
  expect_language(schema, {R"({"a":[1,2]})", "{ \"a\" : [ 1 ,\n 2 ] }"}, {R"({"a":[1,2]} )"},
                  JsonWhitespace::kFlexible);
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreNamed) {
  EXPECT_EQ(schema_error(R"({"type":"string","contentEncoding":"base64"})"),
            "json schema (root): keyword 'contentEncoding' is not supported");
  EXPECT_NE(schema_error(R"({"type":"object","properties":{"x":{"type":"array","uniqueItems":true}}})")
                .find("(root)/properties/x: keyword 'uniqueItems'"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"allOf":[{"type":"integer"},{"type":"string"}]})").find("allOf"), std::string::npos);
  EXPECT_NE(schema_error("false").find("allows no value"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"integer","minimum":5,"maximum":1})").find("leave no number"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"object","required":["x"]})").find("'x'"), std::string::npos);
}

TEST(JsonSchemaTest, AnyValueAndObjectGrammars) {
  auto any = json_value_grammar(JsonWhitespace::kCompact, false);
  ASSERT_TRUE(any.is_ok()) << any.status().to_string();
  const auto g = std::make_shared<const Grammar>(std::move(any).value());
  for (const char* doc : {"1", "[]", R"({"a":[true,null,"x",1.5e-3]})", "\"\""}) EXPECT_TRUE(grammar_matches(g, doc)) << doc;
  auto obj = json_value_grammar(JsonWhitespace::kFlexible, true);
  ASSERT_TRUE(obj.is_ok()) << obj.status().to_string();
  const auto o = std::make_shared<const Grammar>(std::move(obj).value());
  EXPECT_TRUE(grammar_matches(o, R"({ "a" : [1, {"b": null}] })"));
  EXPECT_FALSE(grammar_matches(o, "[1]"));
}

}  // namespace
}  // namespace loragate::grammar

// allOf merging and oneOf disjointness (grammar/schema_combinators.h): each
// merge rule and each error on its own, then an independent check: for a set
// of schemas, python3-jsonschema (2020-12) must call every instance valid
// against the original allOf exactly when it is valid against the merged
// schema, and no instance may match two branches of a oneOf proven disjoint.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>

#include "grammar/json_schema.h"
#include "grammar/schema_combinators.h"
#include "tests/test_util.h"

namespace loragate::grammar {
namespace {

using ojson = nlohmann::ordered_json;

// A root schema and a ResolveRef into it, the way json_schema.cpp resolves "#/..." pointers.
struct CombRoot {
  ojson root;
  ResolveRef resolve;

  explicit CombRoot(const std::string& text) : root(ojson::parse(text)) {
    resolve = [this](const std::string& ref) -> const ojson* {
      if (!ref.starts_with("#")) return nullptr;
      if (ref == "#") return &root;
      try {
        const ojson::json_pointer pointer(ref.substr(1));
        return root.contains(pointer) ? &root.at(pointer) : nullptr;
      } catch (const nlohmann::json::exception&) {
        return nullptr;
      }
    };
  }
  CombRoot(const CombRoot&) = delete;
  CombRoot& operator=(const CombRoot&) = delete;
};

Result<ojson> comb_merge(const std::string& text) {
  const CombRoot r(text);
  return merge_all_of(r.root, r.resolve);
}

ojson comb_merged_ok(const std::string& text) {
  auto m = comb_merge(text);
  EXPECT_TRUE(m.is_ok()) << text << " -> " << m.status().to_string();
  return m.is_ok() ? *m : ojson();
}

std::string comb_error_of(const std::string& text) {
  auto m = comb_merge(text);
  EXPECT_FALSE(m.is_ok()) << text << " merged into " << (m.is_ok() ? m->dump() : "");
  if (m.is_ok()) return "";
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  return m.status().message();
}

Result<bool> comb_disjoint(const std::string& root_text) {
  const CombRoot r(root_text);
  return one_of_branches_disjoint(r.root.at("oneOf"), r.resolve);
}

bool comb_disjoint_ok(const std::string& root_text) {
  auto d = comb_disjoint(root_text);
  EXPECT_TRUE(d.is_ok()) << root_text << " -> " << d.status().to_string();
  return d.is_ok() && *d;
}

// ---- merge rules

TEST(SchemaCombinatorsTest, TypesIntersect) {
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"type":"integer"},{"type":"number"}]})"), ojson::parse(R"({"type":"integer"})"));
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"type":["number","string","null"]},{"type":["integer","null"]}]})"),
            ojson::parse(R"({"type":["integer","null"]})"));
  EXPECT_EQ(comb_merged_ok(R"({"type":["number","string"],"allOf":[{"type":["string","number","boolean"]}, {}]})"),
            ojson::parse(R"({"type":["number","string"]})"));
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"type":"string"},{"type":"integer"}]})"),
            "allOf: 'type' string and integer leave no value");
  EXPECT_NE(comb_error_of(R"({"allOf":[{"type":"string"},{"type":"strnig"}]})").find("unknown type 'strnig'"),
            std::string::npos);
}

TEST(SchemaCombinatorsTest, AnnotationsDropAndASingleMemberStaysAsItIs) {
  EXPECT_EQ(comb_merged_ok(R"({"title":"t","allOf":[{"description":"d","type":"string"},{"minLength":2,"default":"ab"}]})"),
            ojson::parse(R"({"type":"string","minLength":2})"));
  EXPECT_EQ(comb_merged_ok(R"({"$defs":{"a":{"type":"string"}},"allOf":[{"$ref":"#/$defs/a"}]})"),
            ojson::parse(R"({"$ref":"#/$defs/a"})"));
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}],"$defs":{"a":{}}})"),
            ojson::parse(R"({"$ref":"#/$defs/a"})"));
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{},true]})"), ojson::object());
}

TEST(SchemaCombinatorsTest, PropertiesUniteInFirstAppearanceOrderAndRequiredUnites) {
  const ojson m = comb_merged_ok(R"({"allOf":[
      {"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}},"required":["b"]},
      {"properties":{"c":{"type":"boolean"},"a":{"minimum":3}},"required":["c","b"]}]})");
  EXPECT_EQ(m.dump(), ojson::parse(R"({"type":"object",
      "properties":{"b":{"type":"string"},"a":{"type":"integer","minimum":3},"c":{"type":"boolean"}},
      "required":["b","c"]})").dump());
}

TEST(SchemaCombinatorsTest, SiblingsOfAllOfComeWhereTheyStand) {
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"properties":{"a":{}}}],"properties":{"b":{}}})").dump(),
            R"({"properties":{"a":{},"b":{}}})");
  EXPECT_EQ(comb_merged_ok(R"({"properties":{"b":{}},"allOf":[{"properties":{"a":{}}}]})").dump(),
            R"({"properties":{"b":{},"a":{}}})");
}

TEST(SchemaCombinatorsTest, AdditionalPropertiesFalseForbidsWhatItsMemberDoesNotList) {
  // The other member's properties are a subset: kept as they are.
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"properties":{"a":{},"b":{}},"additionalProperties":false},
                                         {"properties":{"a":{"type":"integer"}}}]})").dump(),
            ojson::parse(R"({"properties":{"a":{"type":"integer"},"b":{}},"additionalProperties":false})").dump());
  // Not a subset: the extra name is forbidden, so it goes.
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},
                                         {"properties":{"c":{"type":"integer"}}}]})").dump(),
            ojson::parse(R"({"properties":{"a":{}},"additionalProperties":false})").dump());
  // ... unless it is required: no object then.
  EXPECT_NE(comb_error_of(R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},
                                       {"properties":{"c":{}},"required":["c"]}]})")
                .find("property 'c' is required"),
            std::string::npos);
  EXPECT_NE(comb_error_of(R"({"allOf":[{"type":"object","properties":{"a":{}},"additionalProperties":false},
                                       {"required":["d"]}]})")
                .find("property 'd' is required, and additionalProperties false forbids it"),
            std::string::npos);
  // A schema-valued additionalProperties applies to the other member's names.
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}},
                                         {"properties":{"b":{"minimum":1}},"additionalProperties":{"maximum":9}}]})").dump(),
            ojson::parse(R"({"properties":{"a":{"type":"string","maximum":9},"b":{"type":"integer","minimum":1}},
                             "additionalProperties":{"type":"integer","maximum":9}})").dump());
}

TEST(SchemaCombinatorsTest, EnumAndConstIntersect) {
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"enum":[1,"a",2.5,{"k":1,"j":2}]},{"enum":[1.0,{"j":2,"k":1},"b","a"]}]})"),
            ojson::parse(R"({"enum":[1,"a",{"k":1,"j":2}]})"));
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"const":"x"},{"enum":["y","x"]}]})"), ojson::parse(R"({"const":"x"})"));
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"const":"x"},{"const":"x","type":"string"}]})"), ojson::parse(R"({"const":"x"})"));
  // The other keywords filter the values (the compiler writes an enum alone).
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"enum":[1,"a",2.5,null,"abc"]},{"type":["integer","string"]},{"maxLength":2}]})"),
            ojson::parse(R"({"enum":[1,"a"]})"));
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"enum":[1,2]},{"const":3}]})"),
            "allOf: the 'enum'/'const' values of the members have none in common");
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"enum":[1,2]},{"type":"string"}]})"),
            "allOf: no 'enum'/'const' value passes the other keywords");
  EXPECT_NE(comb_error_of(R"({"allOf":[{"enum":["a","b"]},{"pattern":"^a"}]})").find("'pattern'"), std::string::npos);
}

TEST(SchemaCombinatorsTest, BoundsTakeTheTightest) {
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"minimum":1,"maximum":10,"minLength":1,"maxItems":9},
                                         {"minimum":3,"maximum":12,"exclusiveMaximum":8,"minLength":4,"maxItems":2,"minItems":1},
                                         {"exclusiveMinimum":0,"exclusiveMaximum":9,"maxLength":6}]})").dump(),
            ojson::parse(R"({"minimum":3,"maximum":10,"minLength":4,"maxItems":2,"exclusiveMaximum":8,"minItems":1,
                             "exclusiveMinimum":0,"maxLength":6})").dump());
  EXPECT_NE(comb_error_of(R"({"allOf":[{"minLength":-1},{"minLength":2}]})").find("'minLength' must be a non-negative integer"),
            std::string::npos);
}

TEST(SchemaCombinatorsTest, ItemsMergeAndPrefixItemsMeetTheOtherMembersItems) {
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"items":{"type":"integer"}},{"items":{"minimum":0}}]})"),
            ojson::parse(R"({"items":{"type":"integer","minimum":0}})"));
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"prefixItems":[{"type":"string"},{}],"items":{"type":"integer"}},
                                         {"items":{"type":["string","integer"]}}]})").dump(),
            ojson::parse(R"({"prefixItems":[{"type":"string"},{"type":["string","integer"]}],"items":{"type":"integer"}})").dump());
  // A position no element may take (string and integer) ends the array before it.
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"prefixItems":[{},{"type":"string"}]},{"items":{"type":"integer"}}]})").dump(),
            ojson::parse(R"({"prefixItems":[{"type":"integer"}],"items":{"type":"integer"},"maxItems":1})").dump());
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"items":false},{"items":{"type":"integer"}}]})"), ojson::parse(R"({"items":false})"));
  EXPECT_NE(comb_error_of(R"({"allOf":[{"items":[{}]},{"items":{}}]})").find("'items' as an array"), std::string::npos);
}

TEST(SchemaCombinatorsTest, PatternAndFormatMergeOnlyWhenEqual) {
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"pattern":"^a+$"},{"pattern":"^a+$","type":"string"}]})"),
            ojson::parse(R"({"pattern":"^a+$","type":"string"})"));
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"pattern":"^a"},{"pattern":"b$"}]})"), "allOf: cannot merge 'pattern' with 'pattern'");
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"format":"date"},{"format":"uuid"}]})"), "allOf: cannot merge 'format' with 'format'");
}

TEST(SchemaCombinatorsTest, AnyOfInOneMemberTakesTheOtherKeywordsIntoEachBranch) {
  // The compiler writes only the anyOf of a schema that has one, so the
  // siblings go into the branches; a branch they leave empty goes.
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"anyOf":[{"type":"string"},{"type":"integer","minimum":5},{"type":"boolean"}]},
                                         {"type":["integer","string"],"maximum":10}]})").dump(),
            ojson::parse(R"({"anyOf":[{"type":"string","maximum":10},{"type":"integer","maximum":10,"minimum":5}]})").dump());
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"anyOf":[{"type":"string"},{"type":"null"}]},{"title":"x"}]})"),
            ojson::parse(R"({"anyOf":[{"type":"string"},{"type":"null"}]})"));
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"anyOf":[{"type":"string"},{"type":"null"}]},{"type":"null"}]})"),
            ojson::parse(R"({"type":"null"})"));
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"anyOf":[{"type":"string"}]},{"type":"null"}]})"),
            "allOf: no 'anyOf' branch is compatible with the other keywords");
  EXPECT_NE(comb_error_of(R"({"allOf":[{"anyOf":[{"type":"string"},{}]},{"anyOf":[{"type":"null"},{}]}]})")
                .find("'anyOf' in more than one member"),
            std::string::npos);
  // A single member that holds keywords beside an anyOf is rewritten too.
  EXPECT_EQ(comb_merged_ok(R"({"allOf":[{"type":"string","anyOf":[{"minLength":2},{"type":"null"}]}]})"),
            ojson::parse(R"({"type":"string","minLength":2})"));
}

TEST(SchemaCombinatorsTest, UnsupportedKeywordsAndMalformedMembersAreNamed) {
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"not":{"type":"null"}},{"type":"string"}]})"), "allOf: keyword 'not' is not supported");
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"type":"string"},{"oneOf":[{}]}]})"), "allOf: keyword 'oneOf' is not supported");
  EXPECT_EQ(comb_error_of(R"({"allOf":[]})"), "allOf: allOf must be a non-empty array");
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"type":"string"},false]})"),
            "allOf: a member is the schema false, which allows no value");
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"type":"string"},3]})"), "allOf: a member must be an object or a boolean");
  EXPECT_EQ(comb_error_of(R"({"$defs":{"a":{}},"allOf":[{"$ref":"#/$defs/a","type":"string"},{"minLength":1}]})"),
            "allOf: '$ref' next to other keywords is not supported");
  EXPECT_FALSE(merge_all_of(ojson::parse(R"({"type":"string"})"), nullptr).is_ok());
}

TEST(SchemaCombinatorsTest, RefsResolveNestedAllOfsFlattenAndRecursionStops) {
  EXPECT_EQ(comb_merged_ok(R"({"$defs":{"named":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]},
                                        "aged":{"allOf":[{"properties":{"age":{"type":"integer"}}},{"required":["age"]}]}},
                               "allOf":[{"$ref":"#/$defs/named"},{"allOf":[{"$ref":"#/$defs/aged"}]}]})").dump(),
            ojson::parse(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
                             "required":["name","age"]})").dump());
  // A recursive definition met twice stays a $ref.
  EXPECT_EQ(comb_merged_ok(R"({"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}},
                               "allOf":[{"$ref":"#/$defs/node"},{"properties":{"next":{"$ref":"#/$defs/node"}},"required":["next"]}]})")
                .dump(),
            ojson::parse(R"({"type":"object","properties":{"next":{"$ref":"#/$defs/node"}},"required":["next"]})").dump());
  EXPECT_EQ(comb_error_of(R"({"allOf":[{"$ref":"#/$defs/missing"},{"type":"string"}]})"),
            "allOf: $ref '#/$defs/missing' points at nothing");
  // Two recursive definitions intersected: every level needs another merge.
  EXPECT_NE(comb_error_of(R"({"$defs":{"a":{"properties":{"n":{"$ref":"#/$defs/a"}}},"b":{"properties":{"n":{"$ref":"#/$defs/b"}}}},
                               "allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]})")
                .find("$ref followed more than 16 levels"),
            std::string::npos);
  EXPECT_NE(comb_error_of(R"({"$defs":{"loop":{"allOf":[{"$ref":"#/$defs/loop"},{"type":"string"}]}},
                               "allOf":[{"$ref":"#/$defs/loop"},{"minLength":1}]})")
                .find("16 levels"),
            std::string::npos);
}

TEST(SchemaCombinatorsTest, MergedSchemasCompile) {
  for (const char* text : {
           R"({"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},
                        {"properties":{"a":{"maxLength":4},"b":{"type":"integer","minimum":1}},"additionalProperties":false}]})",
           R"({"allOf":[{"type":"array","items":{"type":"integer"}},{"minItems":1,"maxItems":3,"items":{"maximum":9}}]})",
           R"({"allOf":[{"anyOf":[{"type":"string"},{"type":"integer"}]},{"type":"integer","minimum":0,"maximum":99}]})",
       }) {
    const ojson merged = comb_merged_ok(text);
    auto g = compile_json_schema(merged, {});
    EXPECT_TRUE(g.is_ok()) << merged.dump() << ": " << g.status().to_string();
  }
}

// ---- oneOf

TEST(SchemaCombinatorsTest, OneOfDisjointWhenProven) {
  EXPECT_TRUE(comb_disjoint_ok(R"({"oneOf":[{"type":"string"},{"type":"integer"},{"type":["null","boolean"]}]})"));
  EXPECT_TRUE(comb_disjoint_ok(R"({"oneOf":[{"enum":[1,2]},{"enum":[3,"1"]},{"const":null}]})"));
  EXPECT_TRUE(comb_disjoint_ok(R"({"oneOf":[{"const":"x"},{"type":"integer"}]})"));
  EXPECT_TRUE(comb_disjoint_ok(R"({"oneOf":[{"enum":[1,"a"]},{"type":"integer","minimum":2}]})"));
  // A discriminator: a property both require whose values differ.
  EXPECT_TRUE(comb_disjoint_ok(R"({"oneOf":[
      {"type":"object","properties":{"kind":{"const":"a"},"x":{}},"required":["kind"]},
      {"type":"object","properties":{"kind":{"enum":["b","c"]},"y":{}},"required":["y","kind"]}]})"));
  EXPECT_TRUE(comb_disjoint_ok(R"({"$defs":{"a":{"type":"object","properties":{"kind":{"$ref":"#/$defs/ka"}},"required":["kind"]},
                                           "b":{"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]},
                                           "ka":{"const":"a"}},
                                  "oneOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]})"));
  // Closed objects that each require a name the other does not list.
  EXPECT_TRUE(comb_disjoint_ok(R"({"oneOf":[
      {"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false},
      {"type":"object","properties":{"b":{}},"required":["b"],"additionalProperties":false}]})"));
  EXPECT_TRUE(comb_disjoint_ok(R"({"oneOf":[{"type":"string"},false,{"type":"null"}]})"));
  EXPECT_TRUE(comb_disjoint_ok(R"({"oneOf":[{"anyOf":[{"type":"string"},{"type":"null"}]},{"type":"array"}]})"));
  EXPECT_TRUE(comb_disjoint_ok(R"({"oneOf":[{"allOf":[{"type":["string","integer"]},{"type":"string"}]},{"type":"integer"}]})"));
}

TEST(SchemaCombinatorsTest, OneOfNotProvenIsFalse) {
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})"));
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[{"type":["string","null"]},{"type":"null"}]})"));
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[{"enum":[1,2]},{"enum":[2,3]}]})"));
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[{"const":1},{"const":1.0}]})"));
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[{"type":"object","properties":{"a":{"type":"string"}}},
                                            {"type":"object","properties":{"b":{}}}]})"));
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"}},"required":["kind"]},
                                            {"type":"object"}]})"));
  // Closed, but each may hold what the other requires.
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[
      {"type":"object","properties":{"a":{},"b":{}},"required":["a"],"additionalProperties":false},
      {"type":"object","properties":{"a":{},"b":{}},"required":["b"],"additionalProperties":false}]})"));
  // No type: any value.
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[{"properties":{"a":{}}},{"type":"string"}]})"));
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[{"type":"string"},{}]})"));
  // A pattern cannot be checked here: not proven.
  EXPECT_FALSE(comb_disjoint_ok(R"({"oneOf":[{"enum":["ab"]},{"type":"string","pattern":"^b"}]})"));
  EXPECT_FALSE(comb_disjoint_ok(R"({"$defs":{"a":{"type":"string"}},"oneOf":[{"$ref":"#/$defs/a","minLength":1},{"type":"null"}]})"));
  EXPECT_FALSE(comb_disjoint(R"({"oneOf":[]})").is_ok());
  EXPECT_FALSE(comb_disjoint(R"({"oneOf":[{"$ref":"#/$defs/none"},{"type":"null"}]})").is_ok());
}

// ---- an independent check with python3-jsonschema

constexpr const char* kCombCheckScript = R"(import json, sys
from jsonschema import Draft202012Validator as V
bad = 0
for line in open(sys.argv[1]):
    c = json.loads(line)
    if c["kind"] == "merge":
        V.check_schema(c["merged"])
        a, b = V(c["original"]), V(c["merged"])
        valid = 0
        for x in c["instances"]:
            va, vb = a.is_valid(x), b.is_valid(x)
            valid += va
            if va != vb:
                bad += 1
                print("%s: %s is %s by the allOf, %s by the merged %s" % (c["name"], json.dumps(x), va, vb, json.dumps(c["merged"])))
        if valid == 0 or valid == len(c["instances"]):
            bad += 1
            print("%s: %d of %d instances valid: the case checks nothing" % (c["name"], valid, len(c["instances"])))
    else:
        branches = [V({"$defs": c["defs"], "allOf": [b]}) for b in c["branches"]]
        twice = [x for x in c["instances"] if sum(v.is_valid(x) for v in branches) > 1]
        if c["disjoint"] and twice:
            bad += 1
            print("%s: proven disjoint, yet %s matches two branches" % (c["name"], json.dumps(twice[0])))
        if not c["disjoint"] and not twice:
            bad += 1
            print("%s: said to overlap, but no instance matches two branches" % c["name"])
print("checked, %d problems" % bad)
sys.exit(1 if bad else 0)
)";

struct CombCase {
  const char* name;
  const char* schema;
  const char* instances;  // a JSON array, added to the common ones
};

TEST(SchemaCombinatorsTest, MergedSchemasAcceptExactlyWhatTheAllOfAccepts) {
  if (testing::run_command("python3 -c 'import jsonschema'").first != 0) {
    GTEST_SKIP() << "python3 with the jsonschema module is not installed (Debian: python3-jsonschema)";
  }
  const ojson common = ojson::parse(R"([null, true, false, 0, 1, -1, 2.5, 7, 100, "", "a", "ab", "abc", "hello!",
      [], [1], ["a"], [1, 2], {}, {"a": 1}, {"a": "x"}, {"b": 2}])");
  const CombCase merges[] = {
      {"types", R"({"allOf":[{"type":["string","integer","null"]},{"type":["number","string"]}]})", "[3, 3.0, 3.5]"},
      {"objects",
       R"({"allOf":[{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"]},
                    {"properties":{"a":{"minLength":2},"c":{"type":"boolean"}},"required":["c"]}]})",
       R"([{"a":"xy","c":true}, {"a":"x","c":true}, {"a":"xy"}, {"a":"xy","c":true,"b":1.5}, {"a":"xy","c":true,"b":1},
           {"a":"xy","c":true,"d":[]}, {"a":"xy","c":1}])"},
      {"closed",
       R"({"allOf":[{"properties":{"a":{},"b":{}},"additionalProperties":false},{"properties":{"a":{"type":"integer"},"c":{}}}]})",
       R"([{"a":1,"c":1}, {"a":"x","b":1}, {"b":[]}, {"c":null}, {"a":1,"b":2}])"},
      {"extra-schema",
       R"({"allOf":[{"properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}},
                    {"properties":{"b":{"type":"string"}},"additionalProperties":{"minimum":3}}]})",
       R"([{"b":"x"}, {"b":1}, {"a":"x","c":3}, {"a":"x","c":2}, {"c":"x"}, {"a":5}, {"a":"x"}])"},
      {"enum", R"({"allOf":[{"enum":[1,"a",2.5,null,{"k":1}]},{"type":["integer","string","object"]},{"enum":[1.0,"a",{"k":1},"b"]}]})",
       R"([1.0, {"k":1}, {"k":2}, "b"])"},
      {"enum-object", R"({"allOf":[{"enum":[{"a":1},{"a":"x"},{"b":1},3]},{"type":"object","properties":{"a":{"type":"integer"}}}]})",
       R"([{"a":1}, {"b":1}, 3])"},
      {"bounds", R"({"allOf":[{"minimum":1,"maximum":10},{"minimum":3,"exclusiveMaximum":8},{"exclusiveMinimum":2.5}]})",
       "[2, 3, 5, 7.5, 8, 9, 11, 2.6]"},
      {"lengths", R"({"allOf":[{"minLength":2,"maxLength":8,"maxItems":2},{"minLength":3,"maxLength":5,"pattern":"^a","minItems":1},{"pattern":"^a"}]})",
       R"(["abcd", "abcdef", "bcd", "ab", "a\u00e9\u00e9", [1,2,3]])"},
      {"arrays",
       R"({"allOf":[{"type":"array","items":{"type":"integer"}},{"prefixItems":[{"minimum":0},{"maximum":5}],"items":{"minimum":10},"maxItems":4}]})",
       "[[-1], [1,7], [1,2,3], [1,2,10], [1,2,10,11], [1,2,10,11,12], [1.5], [1, 2.5]]"},
      {"prefix-cut",
       R"({"allOf":[{"prefixItems":[{"type":"string"},{"type":"integer"},{"type":"string"}]},{"prefixItems":[{}],"items":{"type":"integer"}}]})",
       R"([["a"], ["a",1], ["a",1,"b"], ["a",1,2], ["a",1.5], [1, 1]])"},
      {"items-false", R"({"allOf":[{"items":false},{"items":{"type":"integer"}},{"type":["array","string"]}]})", "[[1], []]"},
      {"any-of",
       R"({"allOf":[{"anyOf":[{"type":"string"},{"type":"integer","minimum":5},{"type":"boolean"}]},{"type":["integer","string"]},{"maximum":10,"minLength":2}]})",
       R"([5, 10, 11, 4, "xy", "x", true])"},
      {"refs",
       R"({"$defs":{"named":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]},
                    "aged":{"allOf":[{"properties":{"age":{"type":"integer","minimum":0}}},{"required":["age"]}]}},
           "allOf":[{"$ref":"#/$defs/named"},{"$ref":"#/$defs/aged"}],
           "properties":{"name":{"minLength":1},"age":{},"id":{"type":"integer"}},"additionalProperties":false})",
       R"([{"name":"x","age":3}, {"name":"","age":3}, {"name":"x","age":-1}, {"name":"x"}, {"name":"x","age":3,"id":1},
           {"name":"x","age":3,"id":"1"}, {"name":"x","age":3,"zz":1}])"},
      {"recursive",
       R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}}}},
           "allOf":[{"$ref":"#/$defs/node"},{"properties":{"next":{"$ref":"#/$defs/node"}},"required":["v"]}]})",
       R"([{"v":1}, {"v":1,"next":{"v":"x"}}, {"next":{}}, {"v":1,"next":{"next":{"v":2}}}, {"v":1,"next":{"next":{"v":2.5}}}])"},
      {"single-anyof", R"({"allOf":[{"type":"string","anyOf":[{"minLength":2},{"type":"null"}]}]})", "[]"},
  };
  const CombCase one_ofs[] = {
      {"types", R"({"oneOf":[{"type":"string"},{"type":"integer"},{"type":["null","boolean"]}]})", "[]"},
      {"discriminator",
       R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{}},"required":["kind"]},
                    {"type":"object","properties":{"kind":{"enum":["b","c"]},"y":{}},"required":["y","kind"]}]})",
       R"([{"kind":"a","y":1}, {"kind":"b","y":1,"x":2}, {"kind":"a"}])"},
      {"closed",
       R"({"oneOf":[{"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false},
                    {"type":"object","properties":{"b":{}},"required":["b"],"additionalProperties":false}]})",
       R"([{"a":1,"b":2}, {"a":1}, {"b":1}])"},
      {"enum-vs-type", R"({"oneOf":[{"enum":[1,"a"]},{"type":"integer","minimum":2}]})", "[2, 3]"},
      {"int-number", R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "[]"},
      {"enum-overlap", R"({"oneOf":[{"enum":[1,2]},{"enum":[2,3]}]})", "[2]"},
      {"no-discriminator", R"({"oneOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"b":{}}}]})",
       "[]"},
      {"closed-overlap",
       R"({"oneOf":[{"type":"object","properties":{"a":{},"b":{}},"required":["a"],"additionalProperties":false},
                    {"type":"object","properties":{"a":{},"b":{}},"required":["b"],"additionalProperties":false}]})",
       R"([{"a":1,"b":1}])"},
  };

  const std::string dir = testing::make_temp_dir("lg-schema-combinators");
  ASSERT_FALSE(dir.empty());
  {
    std::ofstream script(dir + "/check.py");
    script << kCombCheckScript;
    std::ofstream cases(dir + "/cases.jsonl");
    for (const CombCase& c : merges) {
      const CombRoot r(c.schema);
      auto merged = merge_all_of(r.root, r.resolve);
      ASSERT_TRUE(merged.is_ok()) << c.name << ": " << merged.status().to_string();
      ojson with_defs = *merged;
      if (r.root.contains("$defs") && with_defs.is_object()) with_defs["$defs"] = r.root["$defs"];
      ojson instances = common;
      for (const ojson& x : ojson::parse(c.instances)) instances.push_back(x);
      cases << ojson{{"kind", "merge"}, {"name", c.name}, {"original", r.root}, {"merged", with_defs},
                     {"instances", instances}}.dump()
            << "\n";
    }
    for (const CombCase& c : one_ofs) {
      const CombRoot r(c.schema);
      auto disjoint = one_of_branches_disjoint(r.root["oneOf"], r.resolve);
      ASSERT_TRUE(disjoint.is_ok()) << c.name << ": " << disjoint.status().to_string();
      ojson instances = common;
      for (const ojson& x : ojson::parse(c.instances)) instances.push_back(x);
      cases << ojson{{"kind", "oneof"}, {"name", c.name}, {"branches", r.root["oneOf"]},
                     {"defs", r.root.value("$defs", ojson::object())}, {"disjoint", *disjoint},
                     {"instances", instances}}.dump()
            << "\n";
    }
  }
  const auto [code, report] = testing::run_command("python3 '" + dir + "/check.py' '" + dir + "/cases.jsonl'");
  EXPECT_EQ(code, 0) << report;
  if (code == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate::grammar

// JSON Schema -> Grammar: the schema is written out as GBNF (readable, and
// parsed by the same front end as guided_grammar), `pattern`s are compiled
// by the regex front end and spliced in. The subset covers OpenAI's strict
// mode and more: type (and lists of types), properties / required /
// additionalProperties, enum, const, anyOf, allOf (merged into one schema,
// grammar/schema_combinators.h), oneOf where no value can match two
// branches (then it is anyOf; "exactly one" cannot be kept by a grammar of
// alternatives otherwise), $ref into $defs / definitions (recursive too),
// items, prefixItems, minItems / maxItems, string minLength / maxLength /
// pattern / format (date, time, date-time, duration, uuid, email, hostname,
// ipv4, ipv6), integer and number minimum / maximum / exclusiveMinimum /
// exclusiveMaximum with fractional bounds too, and multipleOf (whole steps,
// or 0.1, 0.01, ...: grammar/number_range.h). const, enum and anyOf obey the
// keywords beside them. Any other keyword that constrains values is refused
// naming it; annotations (title, description, default, examples, ...) are
// ignored. Properties come out in the schema's order, so the schema must be
// parsed keeping it (ordered_json).
// Stateless; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "grammar/grammar.h"

namespace loragate::grammar {

enum class JsonWhitespace {
  kCompact,   // no whitespace at all: {"a":1,"b":[2,3]}
  kFlexible,  // up to 20 blanks (space, tab, newline) between tokens
};

struct JsonSchemaOptions {
  JsonWhitespace whitespace = JsonWhitespace::kCompact;
};

// The GBNF text a schema compiles to (patterns appear as rules named
// pattern-N, filled in by compile_json_schema); for tests and debugging.
struct JsonSchemaGbnf {
  std::string gbnf;
  std::vector<std::pair<std::string, std::string>> patterns;  // rule name -> regex
};
Result<JsonSchemaGbnf> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options);

Result<Grammar> compile_json_schema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options);

// Any single JSON value (the grammar of the schema `{}`) or, `object_only`, one object.
Result<Grammar> json_value_grammar(JsonWhitespace whitespace, bool object_only);

}  // namespace loragate::grammar

// Structured output on both generation routes: reads response_format
// (json_object, json_schema) and vLLM's guided_json, guided_regex,
// guided_choice and guided_grammar (GBNF), compiles whichever is given to
// the one grammar form the engine masks tokens with, and caches compiled
// grammars by a hash of what was asked (the same schema sent again costs a
// lookup). Errors are 400s naming the field and, for schemas, the keyword.
// Thread-safe (the cache has a lock).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/openai/openai_errors.h"
#include "grammar/grammar.h"

namespace loragate {

// Sets *out to the request's grammar, or leaves it null when the request
// asks for none. `raw_body` is the body's text: schemas are re-read from it
// to keep their properties in the order written (the parsed body sorts keys).
std::optional<ApiError> read_structured_output(const nlohmann::json& body, std::string_view raw_body,
                                               std::shared_ptr<const grammar::Grammar>* out);

// `schema` compiled with compact JSON layout, through the same cache (tool
// calls). Errors name `field` in the message ("tools[0].function.parameters")
// and `param` as the error's param ("tools").
std::optional<ApiError> json_schema_grammar(const nlohmann::ordered_json& schema, const std::string& field,
                                            const std::string& param, std::shared_ptr<const grammar::Grammar>* out);

// Compiled grammars held by the cache, and how many lookups found one (tests, metrics).
struct GrammarCacheStats {
  size_t entries = 0;
  int64_t hits = 0;
  int64_t misses = 0;
};
GrammarCacheStats grammar_cache_stats();

}  // namespace loragate

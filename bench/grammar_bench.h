// Token-mask cost of structured output: for each tokenizer, the time to
// build its byte vocabulary, to compile a JSON schema, and per generated
// token the time to compute the mask along a real document (the sample
// document tokenised, each token checked against its mask before advancing).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace loragate::bench {

struct GrammarBenchOptions {
  std::vector<std::string> tokenizers;  // tokenizer directories; empty = ../shared's Qwen3 and Mistral 7B (run from the repository root)
  std::string schema_file;              // a JSON schema; empty = a built-in extraction schema
  std::string document_file;            // a document that the schema accepts; empty = the built-in one
  int reps = 3;                         // passes over the document (medians reported)
};

Status run_grammar_bench(const GrammarBenchOptions& options);

}  // namespace loragate::bench

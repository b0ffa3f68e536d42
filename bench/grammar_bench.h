// Token-mask cost of structured output: for each tokenizer, the time to
// build its byte vocabulary, to compile a JSON schema, and per generated
// token the time to compute the mask along a real document (the sample
// document tokenised, each token checked against its mask before advancing);
// with a model, batched decode tokens/s constrained by the schema against
// unconstrained, interleaved in one run, with the memory bandwidth probed
// between rounds.
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
  // Decode throughput with the schema against none, interleaved (skipped when model_dir is empty).
  std::string model_dir;
  int batch = 8;
  int new_tokens = 96;
};

Status run_grammar_bench(const GrammarBenchOptions& options);

}  // namespace loragate::bench

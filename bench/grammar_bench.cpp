#include "bench/grammar_bench.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench/bench_util.h"
#include "bench/roofline.h"
#include "engine/engine.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace loragate::bench {
namespace {

// An extraction schema in OpenAI strict style, and a document it accepts.
constexpr const char* kSchema = R"({"type": "object", "properties": {
  "invoice_id": {"type": "string", "pattern": "^INV-[0-9]{6}$"},
  "issued": {"type": "string", "format": "date"},
  "customer": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 80},
               "email": {"type": "string", "format": "email"}}, "required": ["name", "email"],
               "additionalProperties": false},
  "lines": {"type": "array", "minItems": 1, "maxItems": 20, "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1, "maximum": 1000},
            "unit_price": {"type": "number", "minimum": 0}}, "required": ["sku", "qty", "unit_price"],
            "additionalProperties": false}},
  "status": {"enum": ["draft", "sent", "paid"]},
  "notes": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
  "required": ["invoice_id", "issued", "customer", "lines", "status", "notes"], "additionalProperties": false})";

constexpr const char* kDocument =
    R"({"invoice_id":"INV-004211","issued":"2026-11-30","customer":{"name":"Zoë Müller & Söhne GmbH",)"
    R"("email":"billing@mueller-soehne.example.de"},"lines":[{"sku":"CPU-EPYC-9654","qty":2,"unit_price":8999.5},)"
    R"({"sku":"RAM-DDR5-64G","qty":24,"unit_price":219.99},{"sku":"SSD-7.68T","qty":8,"unit_price":1130}],)"
    R"("status":"sent","notes":"Delivery to loading dock B; contact 日本語 OK before 10:00."})";

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The tokenizer's own ids for `document` when their bytes spell it exactly;
// else (SentencePiece adds a leading space at the start of a text) the
// longest-match path through the vocabulary, which a model could emit as well.
Result<std::vector<int32_t>> document_tokens(const Tokenizer& tok, const grammar::TokenVocabulary& vocab,
                                             const std::string& document) {
  std::vector<int32_t> ids = tok.encode(document, false);
  std::string spelled;
  for (int32_t id : ids) spelled += vocab.bytes(id);
  if (spelled == document) return ids;
  ids.clear();
  const auto& trie = vocab.trie();
  for (size_t at = 0; at < document.size();) {
    int32_t node = 0;
    int32_t best = -1;
    size_t best_len = 0;
    for (size_t i = at; i < document.size(); ++i) {
      int32_t child = trie[static_cast<size_t>(node)].first_child;
      while (child >= 0 && trie[static_cast<size_t>(child)].byte != static_cast<uint8_t>(document[i])) {
        child = trie[static_cast<size_t>(child)].next_sibling;
      }
      if (child < 0) break;
      node = child;
      const auto& n = trie[static_cast<size_t>(node)];
      if (n.tokens_end > n.tokens_begin) {
        best = vocab.tokens()[static_cast<size_t>(n.tokens_begin)];
        best_len = i - at + 1;
      }
    }
    if (best < 0) return Status::invalid_argument("no token spells the document's byte " + std::to_string(at));
    ids.push_back(best);
    at += best_len;
  }
  return ids;
}

Status bench_tokenizer(const std::string& dir, const std::string& schema_text, const std::string& document, int reps) {
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::load(dir));
  auto t0 = BenchClock::now();
  const auto vocab = grammar::TokenVocabulary::from_tokenizer(*tok);
  const double vocab_ms = seconds_since(t0) * 1e3;
  t0 = BenchClock::now();
  LG_ASSIGN_OR_RETURN(grammar::Grammar compiled,
                      grammar::compile_json_schema(nlohmann::ordered_json::parse(schema_text), {}));
  const double compile_ms = seconds_since(t0) * 1e3;
  const auto g = std::make_shared<const grammar::Grammar>(std::move(compiled));
  LG_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, document_tokens(*tok, *vocab, document));

  // Each rep: a request meeting the schema first (a fresh automaton: cold),
  // then a second request with it (a cursor on the automaton the first one
  // filled, as the engine shares it: warm).
  std::vector<double> pass_us, warm_pass_us;  // mean per token, per pass
  std::vector<double> per_token_us;
  double allowed_sum = 0;
  grammar::TokenMask mask;
  for (int rep = 0; rep < reps; ++rep) {
    auto automaton = std::make_shared<grammar::Automaton>(g);
    for (const bool warm : {false, true}) {
      grammar::Matcher m(automaton);
      double total = 0;
      for (int32_t id : ids) {
        const auto t = BenchClock::now();
        grammar::compute_token_mask(m, *vocab, &mask);
        const double us = seconds_since(t) * 1e6;
        total += us;
        if (rep == 0 && !warm) {
          per_token_us.push_back(us);
          for (uint64_t w : mask) allowed_sum += static_cast<double>(__builtin_popcountll(w));
        }
        if (!grammar::mask_test(mask, id)) {
          return Status::internal("the mask refused token " + std::to_string(id) + " ('" + vocab->bytes(id) +
                                  "') of a document the schema accepts");
        }
        if (!m.advance(vocab->bytes(id))) return Status::internal("the matcher refused an allowed token");
      }
      if (!m.accepts()) return Status::internal("the document is not a whole sentence of the schema's grammar");
      (warm ? warm_pass_us : pass_us).push_back(total / static_cast<double>(ids.size()));
    }
  }
  std::printf("%-40s vocab %6d tokens (trie %7zu nodes, built in %6.1f ms), schema compiled in %5.2f ms\n",
              dir.c_str(), vocab->size(), vocab->trie().size(), vocab_ms, compile_ms);
  std::printf("  %zu document tokens: mask per token mean %7.1f us (median of %d passes), p50 %7.1f us, p90 %7.1f us, "
              "max %8.1f us; %.0f tokens allowed on average\n",
              ids.size(), median(pass_us), reps, percentile(per_token_us, 50), percentile(per_token_us, 90),
              percentile(per_token_us, 100), allowed_sum / static_cast<double>(ids.size()));
  std::printf("  a second request with the schema (the engine shares the automaton): mask per token mean %7.2f us "
              "(median of %d passes), %.0fx less\n",
              median(warm_pass_us), reps, median(pass_us) / std::max(median(warm_pass_us), 1e-3));
  return Status::ok();
}

// Generated tokens per second of `batch` sampled requests (seeded), each with `g` (or none).
Result<double> decode_tps(Engine& engine, std::shared_ptr<const grammar::Grammar> g, int batch, int new_tokens,
                          int round) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < batch; ++i) {
    GenerationRequest r = greedy_request(16, new_tokens, engine.config().vocab_size, i);
    r.params.temperature = 1.0f;
    r.params.seed = static_cast<uint64_t>(round * 1000 + i);
    r.params.grammar = g;
    requests.push_back(std::move(r));
  }
  const auto t0 = BenchClock::now();
  LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> results, engine.generate(std::move(requests)));
  const double seconds = seconds_since(t0);
  int64_t tokens = 0;
  for (const GenerationResult& r : results) {
    if (r.finish_reason == FinishReason::kError) return Status::internal("a constrained request failed: " + r.error);
    tokens += static_cast<int64_t>(r.output_ids.size());
  }
  return static_cast<double>(tokens) / seconds;
}

Status bench_decode(const GrammarBenchOptions& o, const std::string& schema_text) {
  EngineOptions eo;
  eo.max_num_seqs = o.batch;
  eo.prefix_caching = false;
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(o.model_dir, eo));
  LG_ASSIGN_OR_RETURN(grammar::Grammar compiled,
                      grammar::compile_json_schema(nlohmann::ordered_json::parse(schema_text), {}));
  const auto g = std::make_shared<const grammar::Grammar>(std::move(compiled));
  LG_RETURN_IF_ERROR(decode_tps(*engine, g, o.batch, 8, 0).status());  // builds the vocabulary, warms up
  std::vector<double> free_tps, json_tps, ratio, triad;
  const int threads = engine_threads();
  for (int round = 1; round <= o.reps; ++round) {
    triad.push_back(measure_triad_gbps(threads, 3));
    LG_ASSIGN_OR_RETURN(const double f, decode_tps(*engine, nullptr, o.batch, o.new_tokens, round));
    LG_ASSIGN_OR_RETURN(const double j, decode_tps(*engine, g, o.batch, o.new_tokens, round));
    free_tps.push_back(f);
    json_tps.push_back(j);
    ratio.push_back(j / f);
  }
  std::printf("%s, batch %d, %d new tokens, %d threads: unconstrained %.1f tok/s, JSON schema %.1f tok/s, "
              "ratio %.3f (medians of %d interleaved rounds; triad %.1f GB/s)\n",
              o.model_dir.c_str(), o.batch, o.new_tokens, threads, median(free_tps), median(json_tps), median(ratio),
              o.reps, median(triad));
  return Status::ok();
}

}  // namespace

Status run_grammar_bench(const GrammarBenchOptions& options) {
  std::vector<std::string> dirs = options.tokenizers;
  if (dirs.empty()) dirs = {"../shared/tokenizers/qwen3", "../shared/tokenizers/mistral7b"};  // from the repository root
  std::string schema = kSchema;
  std::string document = kDocument;
  if (!options.schema_file.empty()) {
    LG_ASSIGN_OR_RETURN(schema, read_text(options.schema_file));
  }
  if (!options.document_file.empty()) {
    LG_ASSIGN_OR_RETURN(document, read_text(options.document_file));
  }
  for (const std::string& dir : dirs) LG_RETURN_IF_ERROR(bench_tokenizer(dir, schema, document, options.reps));
  if (!options.model_dir.empty()) LG_RETURN_IF_ERROR(bench_decode(options, schema));
  return Status::ok();
}

}  // namespace loragate::bench

// `loragate bench serve`: load against a running server (see bench/serve_bench.h).
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <string>

#include "bench/serve_bench.h"
#include "cli/commands.h"

namespace loragate::cli {

namespace {

// "inf" (or "infinity", "0" meaning no pacing is not accepted) or a positive number.
std::string check_rate(const std::string& text) {
  if (text == "inf" || text == "infinity") return "";
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v > 0) || std::isinf(v) || std::isnan(v)) {
    return "--rate must be a positive number of requests/s or 'inf'";
  }
  return "";
}

}  // namespace

void add_bench_serve_command(CLI::App& bench) {
  struct State {
    bench::ServeBenchOptions o;
    std::string rate = "inf";
  };
  auto s = std::make_shared<State>();
  if (const char* env = std::getenv("LORAGATE_URL"); env != nullptr && *env != '\0') s->o.url = env;

  CLI::App* cmd = bench.add_subcommand("serve", "Load a running server: Poisson arrivals over Zipf-skewed adapters");
  cmd->add_option("--url", s->o.url, "Server base URL (default $LORAGATE_URL or http://127.0.0.1:8000)")
      ->capture_default_str();
  cmd->add_option("--rate", s->rate, "Requests per second, Poisson; 'inf' sends all at once")
      ->check(CLI::Validator(check_rate, "RATE"))
      ->capture_default_str();
  cmd->add_option("--requests", s->o.requests, "Requests to send (conversations with --turns > 1)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--adapters", s->o.adapters,
                  "Adapters to spread requests over (K); default all named/served, 0 = base model only")
      ->check(CLI::Range(-1, 1 << 20));
  cmd->add_option("--zipf", s->o.zipf_s, "Zipf exponent of adapter popularity (0 = uniform)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmd->add_option("--base-fraction", s->o.base_fraction, "Share of requests sent to the base model")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--prompt-len", s->o.prompt_len, "Prompt words (or token ids with --token-ids)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-tokens", s->o.max_tokens, "Tokens generated per request (EOS ignored)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--concurrency", s->o.concurrency, "Client threads: the most requests in flight")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--slo-ttft-ms", s->o.slo_ttft_ms, "TTFT objective for goodput (0 = none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--slo-tpot-ms", s->o.slo_tpot_ms, "TPOT objective for goodput (0 = none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", s->o.seed, "Seed of arrivals, adapter picks and prompts")->capture_default_str();
  cmd->add_option("--model", s->o.model, "Base model id (default: the one /v1/models lists)");
  cmd->add_option("--model-prefix", s->o.model_prefix, "Prepended to adapter names in the request's model");
  cmd->add_option("--adapter-names", s->o.adapter_names, "Adapters by popularity rank (default: from /v1/models)")
      ->delimiter(',');
  cmd->add_flag("--token-ids", s->o.token_ids, "Send prompts as token ids (models without a tokenizer)");
  cmd->add_option("--vocab", s->o.vocab, "Token ids are drawn from [3, vocab)")->check(CLI::Range(4, 1 << 30));
  cmd->add_option("--temperature", s->o.temperature, "Sampling temperature")->check(CLI::NonNegativeNumber);
  cmd->add_option("--timeout", s->o.timeout_s, "Seconds a stream may stay silent before it fails")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--shared-prefix-len", s->o.shared_prefix_len,
                  "Words (or ids with --token-ids) of one system prompt, fixed by the seed, before every prompt")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--turns", s->o.turns,
                  "Requests per conversation, in order: each prompt is the last one, its answer and a new "
                  "--prompt-len user turn")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_flag("--cache-salt-per-request", s->o.cache_salt_per_request,
                "Send a unique cache_salt with every request: a prefix cache can find nothing");
  cmd->add_option("--result-json", s->o.result_json, "Also write the summary and per-request figures here");
  cmd->callback([s] {
    s->o.rate = (s->rate == "inf" || s->rate == "infinity") ? std::numeric_limits<double>::infinity()
                                                             : std::strtod(s->rate.c_str(), nullptr);
    auto r = bench::run_serve_bench(s->o, std::cout);
    if (!r.is_ok()) throw CLI::RuntimeError(fail(r.status().message()));
    if (r->completed == 0) throw CLI::RuntimeError(fail("no request completed"));
  });
}

}  // namespace loragate::cli

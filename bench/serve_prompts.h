// The prompts `loragate bench serve` sends: random words (or token ids with
// --token-ids), each optionally after one shared system prompt
// (--shared-prefix-len), and in a multi-turn replay (--turns) each turn's
// prompt the previous prompt, the previous answer and a new user turn, so a
// prefix cache can find everything but the answer's end and the new turn.
//
// Everything is fixed by the options' seed: the same options give the same
// prompts in every run and on every server, which is what lets two servers
// (prefix caching on and off) be compared on one workload.
//
// Thread-safety: a ServePrompts is immutable after construction; its const
// methods may be called from any number of threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/serve_bench.h"

namespace loragate::bench {

// A prompt in the form the options ask for: `ids` with token_ids, else `text`.
struct BenchPrompt {
  std::vector<int32_t> ids;
  std::string text;
};

// What a server answered to one turn, as the next turn extends it.
struct TurnAnswer {
  std::string text;           // the streamed text deltas, concatenated
  std::vector<int32_t> ids;   // the generated token ids, where the response carried them
};

// Token ids standing in for `text` where the server returned no ids: one id
// in [3, vocab) per whitespace-separated word (a hash of the word), so the
// same answer always extends a prompt the same way.
std::vector<int32_t> words_as_ids(std::string_view text, int vocab);

class ServePrompts {
 public:
  // Uses token_ids, vocab, prompt_len, shared_prefix_len and seed.
  explicit ServePrompts(const ServeBenchOptions& options);

  // The system prompt every conversation starts with (empty without --shared-prefix-len).
  const BenchPrompt& shared_prefix() const { return prefix_; }
  // prompt_len fresh words or ids: turn `turn` of conversation `conversation`.
  BenchPrompt user_turn(int conversation, int turn) const;
  // The first turn's prompt: the shared prefix, then the first user turn.
  BenchPrompt first(int conversation) const;
  // Turn `turn` (>= 1): `previous` (the last turn's prompt), its `answer`
  // (ids where the answer has them and the prompts are ids; else its text,
  // as words_as_ids in id form), then a new user turn.
  BenchPrompt next(const BenchPrompt& previous, const TurnAnswer& answer, int conversation, int turn) const;

 private:
  bool token_ids_;
  int vocab_;
  int prompt_len_;
  uint64_t seed_;
  BenchPrompt prefix_;
};

}  // namespace loragate::bench

#include "bench/serve_prompts.h"

#include <algorithm>
#include <iterator>
#include <random>

namespace loragate::bench {

namespace {

const char* const kPromptWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "that",  "for",   "it",    "as",    "was",   "with",
    "be",    "by",    "on",    "not",   "he",    "this",  "are",   "or",    "his",   "from",  "at",    "which",
    "but",   "have",  "an",    "had",   "they",  "you",   "were",  "their", "one",   "all",   "we",    "can",
    "her",   "has",   "there", "been",  "if",    "more",  "when",  "will",  "would", "who",   "so",    "no",
    "time",  "people", "year", "way",   "day",   "man",   "thing", "woman", "life",  "child", "world", "school",
    "state", "family", "group", "water"};

// `len` random ids in [3, vocab) or words, from `rng`.
BenchPrompt random_bench_prompt(bool token_ids, int vocab, int len, std::mt19937_64& rng) {
  BenchPrompt p;
  if (token_ids) {
    std::uniform_int_distribution<int> id(3, std::max(3, vocab - 1));
    p.ids.reserve(static_cast<size_t>(len));
    for (int i = 0; i < len; ++i) p.ids.push_back(id(rng));
  } else {
    std::uniform_int_distribution<size_t> w(0, std::size(kPromptWords) - 1);
    for (int i = 0; i < len; ++i) {
      if (i) p.text.push_back(' ');
      p.text += kPromptWords[w(rng)];
    }
  }
  return p;
}

// `tail` after `head`: ids appended, or text joined by one space (none when either is empty).
void append_prompt(BenchPrompt& head, const BenchPrompt& tail) {
  head.ids.insert(head.ids.end(), tail.ids.begin(), tail.ids.end());
  if (!head.text.empty() && !tail.text.empty()) head.text.push_back(' ');
  head.text += tail.text;
}

uint64_t hash_word(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::vector<int32_t> words_as_ids(std::string_view text, int vocab) {
  std::vector<int32_t> ids;
  const uint64_t span = static_cast<uint64_t>(std::max(1, vocab - 3));
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = text.find_first_not_of(" \t\n\r\f\v", i);
    if (start == std::string_view::npos) break;
    size_t end = text.find_first_of(" \t\n\r\f\v", start);
    if (end == std::string_view::npos) end = text.size();
    ids.push_back(static_cast<int32_t>(3 + hash_word(text.substr(start, end - start)) % span));
    i = end;
  }
  return ids;
}

ServePrompts::ServePrompts(const ServeBenchOptions& o)
    : token_ids_(o.token_ids), vocab_(o.vocab), prompt_len_(o.prompt_len), seed_(o.seed) {
  std::mt19937_64 rng(o.seed ^ 0x51a7edc0ffee5eedull);  // a stream no user turn draws from
  prefix_ = random_bench_prompt(token_ids_, vocab_, std::max(0, o.shared_prefix_len), rng);
}

BenchPrompt ServePrompts::user_turn(int conversation, int turn) const {
  // Turn 0 draws what single-turn runs always drew for request `conversation`.
  uint64_t state = seed_ * 1000003ull + static_cast<uint64_t>(conversation) + 1;
  if (turn > 0) state ^= static_cast<uint64_t>(turn) * 0x9e3779b97f4a7c15ull;
  std::mt19937_64 rng(state);
  return random_bench_prompt(token_ids_, vocab_, prompt_len_, rng);
}

BenchPrompt ServePrompts::first(int conversation) const {
  BenchPrompt p = prefix_;
  append_prompt(p, user_turn(conversation, 0));
  return p;
}

BenchPrompt ServePrompts::next(const BenchPrompt& previous, const TurnAnswer& answer, int conversation,
                               int turn) const {
  BenchPrompt p = previous;
  if (token_ids_) {
    const std::vector<int32_t> said = answer.ids.empty() ? words_as_ids(answer.text, vocab_) : answer.ids;
    p.ids.insert(p.ids.end(), said.begin(), said.end());
  } else {
    p.text += answer.text;  // the completion continues the prompt's text as it was generated
  }
  append_prompt(p, user_turn(conversation, turn));
  return p;
}

}  // namespace loragate::bench

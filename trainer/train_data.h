// Training data: JSONL files turned into token sequences with a loss mask.
//
// Two line shapes (one per file, every line the same shape):
//   {"prompt": "...", "completion": "..."}  ids = encode(prompt + completion)
//       with the tokenizer's special tokens (BOS); the loss covers the
//       tokens past encode(prompt) (the fixtures' recipe). A line whose
//       encode(prompt + completion) does not start with encode(prompt) is
//       refused, naming the line.
//   {"messages": [{"role", "content"}, ...]}  rendered with the model's chat
//       template (encoded without adding special tokens: the template
//       writes them); the loss covers each assistant turn's content and the
//       end-of-turn token the template writes after it (chat_example.h).
// Other keys on a line are ignored. Lines are bounded in size and count
// (refused past the caps, never cut), and every error names the line number
// but never quotes the file's content.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "common/status.h"
#include "tokenizer/tokenizer.h"
#include "trainer/train_config.h"

namespace loragate::train {

struct TrainExample {
  std::vector<int32_t> ids;
  // target[t] == 1: ids[t] is a loss target, predicted from position t - 1
  // (so target[0] is always 0). Same length as ids.
  std::vector<uint8_t> target;
  int64_t num_targets() const;
};

struct TrainData {
  std::vector<TrainExample> examples;
  std::string sha256;     // of the file's bytes
  int64_t target_tokens = 0;
};

inline constexpr int64_t kMaxTrainFileBytes = int64_t{1} << 30;
inline constexpr int64_t kMaxTrainExamples = 1'000'000;

// Reads `path` (a regular file; inside one of `roots` when roots is not
// empty). Refuses an example longer than max_seq_len tokens or with no loss
// target, naming its line.
Result<TrainData> load_train_data(const std::string& path, const Tokenizer& tokenizer,
                                  const ChatTemplate& chat_template, int64_t max_seq_len,
                                  const std::vector<std::string>& roots = {});

// The order examples are drawn in: deterministic from the seed, and
// reproducible from any step (resume replays nothing: position() and
// seek() restore it). The same on every platform (its own generator, no
// std:: distributions). Implemented in batch_sampler.cpp.
//   kReplacement: micro-batch n draws `batch` indices uniformly with
//       replacement from a generator seeded by (seed, n): seek is O(1).
//   kShuffle: the examples in a seeded permutation per epoch (seeded by
//       (seed, epoch)), walked in order and cut into micro-batches; a
//       micro-batch may straddle two epochs, so that every epoch draws
//       each example exactly once. seek recomputes one permutation.
// num_examples and batch must be positive (load_train_data never gives an
// empty set, train_config_from_json a batch under 1); otherwise next() gives
// an empty list. Not thread-safe: one owner.
class BatchSampler {
 public:
  BatchSampler(int64_t num_examples, int64_t batch, uint64_t seed, Sampling sampling);
  // The next micro-batch's example indices (batch of them).
  std::vector<int64_t> next();
  // Micro-batches drawn so far; seek(n) puts the sampler where it was after n
  // (n < 0 counts as 0).
  int64_t position() const { return position_; }
  void seek(int64_t micro_batches);

 private:
  void shuffle_epoch(int64_t epoch);  // permutation_ := epoch's order

  int64_t num_examples_, batch_;
  uint64_t seed_;
  Sampling sampling_;
  int64_t position_ = 0;
  // kShuffle: the current epoch's order and the next place in it.
  std::vector<int64_t> permutation_;
  int64_t epoch_ = -1;
  int64_t cursor_ = 0;
};

}  // namespace loragate::train

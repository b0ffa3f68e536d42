// ForwardBatch: what one model step computes — prefill chunks and decode
// tokens of many sequences, each at its own positions, with its own KV blocks.
// Built by the engine from the scheduler's decisions; read by the model.
// Logits are wanted for a run of each sequence's tokens: its last token when
// it samples, and the tokens before each scored prompt token (prompt logprobs).
#pragma once

#include <cstdint>
#include <vector>

namespace loragate {

struct ForwardSeq {
  int64_t token_begin = 0;        // index of its first token in ForwardBatch::tokens
  int64_t num_tokens = 0;         // tokens of this sequence in the step (chunk or 1 for decode)
  int64_t start_pos = 0;          // position of its first token in this step
  const int32_t* block_table = nullptr;  // blocks covering positions [0, start_pos + num_tokens)
  int64_t logits_begin = 0;       // index within this chunk of the first token whose logits are wanted
  int64_t num_logits = 0;         // tokens from logits_begin whose logits are wanted; 0 = none
  int32_t lora_slot = -1;         // adapter slot of its tokens; -1 = none
};

struct ForwardBatch {
  std::vector<int32_t> tokens;    // [T] token ids of all sequences, sequence after sequence
  std::vector<int32_t> positions; // [T] absolute position of each token
  std::vector<ForwardSeq> seqs;

  void clear() {
    tokens.clear();
    positions.clear();
    seqs.clear();
  }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_logit_rows() const {
    int64_t n = 0;
    for (const ForwardSeq& s : seqs) n += s.num_logits;
    return n;
  }
};

}  // namespace loragate

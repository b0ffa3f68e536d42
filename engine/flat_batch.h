// FlatBatch: a ForwardBatch as the flat arrays a device runner copies to the
// device in one go (its ForwardSeqs point into host block tables), plus the
// metadata its kernels index by: adapter segments for SGMV (Punica
// semantics: runs of tokens with one slot, -1 = the base alone) and the
// CUDA-graph key of a decode step.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/forward_batch.h"

namespace loragate {

// Tokens [begin, end) of one step that share an adapter slot (>= 0).
struct LoraSegmentSpan {
  int32_t slot = -1;
  int32_t begin = 0, end = 0;
  bool operator==(const LoraSegmentSpan&) const = default;
};

struct FlatBatch {
  std::vector<int32_t> token_ids;     // [T]
  std::vector<int32_t> positions;     // [T]
  std::vector<int32_t> token_slots;   // [T] adapter slot of each token, -1 = none
  std::vector<int32_t> query_starts;  // [S + 1] first token of each sequence, then T
  std::vector<int32_t> context_lens;  // [S] positions cached after this step (start_pos + num_tokens)
  int32_t max_blocks = 0;             // columns of block_tables
  std::vector<int32_t> block_tables;  // [S, max_blocks] row-major; -1 past a sequence's blocks
  std::vector<int32_t> logits_rows;   // [R] the token whose logits each output row holds
  std::vector<LoraSegmentSpan> lora_segments;  // slots >= 0 only, in token order

  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
};

// Flattens `batch` for a KV pool of `block_size`-token blocks.
FlatBatch flatten(const ForwardBatch& batch, int32_t block_size);

// A decode step's CUDA graph: captured once per (padded batch size, whether
// any adapter is active), since a graph fixes its shapes and kernels and
// the no-adapter graph skips the SGMV launches.
struct DecodeGraphKey {
  int32_t batch = 0;        // the bucket the step's sequences are padded to
  bool lora = false;
  bool operator==(const DecodeGraphKey&) const = default;
};
// Batch sizes graphs are captured for: 1, 2, 4, then every multiple of 8 up to 256.
const std::vector<int32_t>& decode_graph_buckets();
// The graph a step replays: only pure decode steps (one token and one logits
// row per sequence) of at most the largest bucket have one; others run eagerly.
std::optional<DecodeGraphKey> decode_graph_key(const FlatBatch& batch);

}  // namespace loragate

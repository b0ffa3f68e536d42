#include "engine/flat_batch.h"

#include <algorithm>

namespace loragate {

FlatBatch flatten(const ForwardBatch& batch, int32_t block_size) {
  FlatBatch f;
  f.token_ids = batch.tokens;
  f.positions = batch.positions;
  f.token_slots.assign(batch.tokens.size(), -1);
  const auto blocks_of = [&](const ForwardSeq& s) {
    return static_cast<int32_t>((s.start_pos + s.num_tokens + block_size - 1) / block_size);
  };
  for (const ForwardSeq& s : batch.seqs) f.max_blocks = std::max(f.max_blocks, blocks_of(s));
  f.block_tables.assign(batch.seqs.size() * static_cast<size_t>(f.max_blocks), -1);
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const ForwardSeq& s = batch.seqs[i];
    f.query_starts.push_back(static_cast<int32_t>(s.token_begin));
    f.context_lens.push_back(static_cast<int32_t>(s.start_pos + s.num_tokens));
    std::copy_n(s.block_table, blocks_of(s), f.block_tables.begin() + static_cast<ptrdiff_t>(i) * f.max_blocks);
    std::fill_n(f.token_slots.begin() + s.token_begin, s.num_tokens, s.lora_slot);
    for (int64_t r = 0; r < s.num_logits; ++r) {
      f.logits_rows.push_back(static_cast<int32_t>(s.token_begin + s.logits_begin + r));
    }
  }
  f.query_starts.push_back(f.num_tokens());
  // Runs of one slot; the engine sorts sequences by slot, so each adapter is one run.
  for (int32_t t = 0; t < f.num_tokens(); ++t) {
    const int32_t slot = f.token_slots[static_cast<size_t>(t)];
    if (slot < 0) continue;
    if (!f.lora_segments.empty() && f.lora_segments.back().slot == slot && f.lora_segments.back().end == t) {
      ++f.lora_segments.back().end;
    } else {
      f.lora_segments.push_back({slot, t, t + 1});
    }
  }
  return f;
}

const std::vector<int32_t>& decode_graph_buckets() {
  static const std::vector<int32_t> buckets = [] {
    std::vector<int32_t> b = {1, 2, 4};
    for (int32_t n = 8; n <= 256; n += 8) b.push_back(n);
    return b;
  }();
  return buckets;
}

std::optional<DecodeGraphKey> decode_graph_key(const FlatBatch& batch) {
  const int32_t seqs = batch.num_seqs();
  if (seqs == 0 || batch.num_tokens() != seqs || static_cast<int32_t>(batch.logits_rows.size()) != seqs) {
    return std::nullopt;
  }
  const std::vector<int32_t>& buckets = decode_graph_buckets();
  const auto bucket = std::lower_bound(buckets.begin(), buckets.end(), seqs);
  if (bucket == buckets.end()) return std::nullopt;
  return DecodeGraphKey{*bucket, !batch.lora_segments.empty()};
}

}  // namespace loragate

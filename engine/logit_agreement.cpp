#include "engine/logit_agreement.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/block_manager.h"
#include "engine/forward_batch.h"
#include "engine/kv_cache.h"
#include "kernels/cpu/ops.h"

namespace loragate {
namespace {

constexpr int32_t kBlockTokens = 16;

// Logits of positions [first, size) of `ids`, one forward pass from an empty cache.
Result<std::vector<float>> logits_from(const LlamaModel& model, const std::vector<int32_t>& ids, int64_t first) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const auto blocks = static_cast<int32_t>((n + kBlockTokens - 1) / kBlockTokens);
  LG_ASSIGN_OR_RETURN(KvCache cache, KvCache::create(model.config(), kBlockTokens, blocks, 0));
  BlockManager manager(blocks, kBlockTokens);
  BlockTable table;
  LG_RETURN_IF_ERROR(manager.grow(table, n));
  ForwardBatch batch;
  batch.tokens = ids;
  for (int64_t i = 0; i < n; ++i) batch.positions.push_back(static_cast<int32_t>(i));
  batch.seqs.push_back({0, n, 0, table.data(), first, n - first});
  ForwardWorkspace ws;
  std::vector<float> logits(static_cast<size_t>((n - first) * model.config().vocab_size));
  LG_RETURN_IF_ERROR(model.forward(batch, cache, ws, logits.data()));
  return logits;
}

}  // namespace

Result<LogitAgreement> compare_logits(const LlamaModel& reference, const LlamaModel& candidate,
                                      const std::vector<std::vector<int32_t>>& sequences,
                                      const std::vector<int64_t>& prompt_lens) {
  const int64_t vocab = reference.config().vocab_size;
  if (candidate.config().vocab_size != vocab) return Status::invalid_argument("the models' vocabularies differ");
  if (prompt_lens.size() != sequences.size()) return Status::invalid_argument("one prompt length per sequence");
  LogitAgreement a;
  double sum_error = 0;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const std::vector<int32_t>& ids = sequences[s];
    const int64_t first = prompt_lens[s] - 1, n = static_cast<int64_t>(ids.size());
    if (prompt_lens[s] < 1 || prompt_lens[s] >= n) {
      return Status::invalid_argument("sequence " + std::to_string(s) + ": prompt length " +
                                      std::to_string(prompt_lens[s]) + " leaves no continuation of " +
                                      std::to_string(n) + " tokens");
    }
    LG_ASSIGN_OR_RETURN(std::vector<float> want, logits_from(reference, ids, first));
    LG_ASSIGN_OR_RETURN(std::vector<float> got, logits_from(candidate, ids, first));
    // The last position predicts past the sequence: nothing to compare it with.
    for (int64_t p = 0; p + 1 < n - first; ++p) {
      const float* w = want.data() + p * vocab;
      const float* g = got.data() + p * vocab;
      for (int64_t v = 0; v < vocab; ++v) {
        const double e = std::fabs(static_cast<double>(g[v]) - static_cast<double>(w[v]));
        a.max_abs_error = std::max(a.max_abs_error, e);
        sum_error += e;
      }
      ++a.positions;
      if (cpu::argmax(w, vocab) == cpu::argmax(g, vocab)) ++a.top1_same;
    }
  }
  if (a.positions > 0) a.mean_abs_error = sum_error / static_cast<double>(a.positions * vocab);
  return a;
}

}  // namespace loragate

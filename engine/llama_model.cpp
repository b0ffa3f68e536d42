#include "engine/llama_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "engine/rope_tables.h"
#include "kernels/cpu/lora.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/thread_pool.h"

namespace loragate {
namespace {

void ensure(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

LlamaModel::LlamaModel(ModelConfig config, std::unique_ptr<LlamaWeights> weights)
    : config_(std::move(config)), weights_(std::move(weights)), inv_freq_(rope_inv_freq(config_)) {}

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const ModelDir& dir, WeightType storage, const LoraAdapter* merge,
                                                      float outlier_threshold) {
  if (!(outlier_threshold > 0)) {
    return Status::invalid_argument("outlier_threshold must be > 0, got " + std::to_string(outlier_threshold));
  }
  LG_ASSIGN_OR_RETURN(std::unique_ptr<LlamaWeights> weights,
                      LlamaWeights::load(dir.weights(), dir.config(), storage, merge));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model, from_parts(dir.config(), std::move(weights)));
  model->outlier_threshold_ = outlier_threshold;
  if (storage == WeightType::kInt8Outlier) {
    model->outliers_ = std::make_unique<OutlierCounter[]>(static_cast<size_t>(model->config_.num_hidden_layers) + 1);
  }
  return model;
}

std::vector<cpu::OutlierCounts> LlamaModel::outlier_counts() const {
  std::vector<cpu::OutlierCounts> out;
  if (outliers_ == nullptr) return out;
  for (int64_t i = 0; i <= config_.num_hidden_layers; ++i) {
    const OutlierCounter& c = outliers_[static_cast<size_t>(i)];
    out.push_back({c.columns.load(std::memory_order_relaxed), c.outliers.load(std::memory_order_relaxed)});
  }
  return out;
}

void LlamaModel::linear(const float* x, int64_t m, int64_t ldx, const cpu::PackedMatrix& w, float* y, int64_t ldy,
                        size_t counter) const {
  if (w.storage() != WeightType::kInt8Outlier) return cpu::matmul(x, m, ldx, w, y, ldy);
  cpu::OutlierCounts counts;
  cpu::matmul_int8_outlier(x, m, ldx, w, outlier_threshold_, y, ldy, &counts);
  outliers_[counter].columns.fetch_add(counts.columns, std::memory_order_relaxed);
  outliers_[counter].outliers.fetch_add(counts.outliers, std::memory_order_relaxed);
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::from_parts(ModelConfig config,
                                                           std::unique_ptr<LlamaWeights> weights) {
  if (config.head_dim % 2 != 0) return Status::unsupported("rotary embedding needs an even head_dim");
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(config), std::move(weights)));
}

void LlamaModel::compute_rope(const ForwardBatch& batch, ForwardWorkspace& ws) const {
  const size_t half = inv_freq_.size();
  ensure(ws.rope_cos, batch.tokens.size() * half);
  ensure(ws.rope_sin, batch.tokens.size() * half);
  rope_tables(inv_freq_, batch.positions.data(), batch.tokens.size(), ws.rope_cos.data(), ws.rope_sin.data());
}

void LlamaModel::attention(const ForwardBatch& batch, int64_t layer, KvCache& cache, ForwardWorkspace& ws) const {
  const ModelConfig& c = config_;
  const int64_t q_out = c.num_attention_heads * c.head_dim;
  const int64_t kv_out = c.num_key_value_heads * c.head_dim;
  const int64_t qkv_width = q_out + 2 * kv_out;
  const int64_t bs = cache.block_size();
  float* k_cache = cache.k(layer);
  float* v_cache = cache.v(layer);

  // Store this step's K and V first: a prefill chunk attends to itself.
  for (const ForwardSeq& s : batch.seqs) {
    for (int64_t i = 0; i < s.num_tokens; ++i) {
      const int64_t pos = s.start_pos + i;
      const int64_t slot = static_cast<int64_t>(s.block_table[pos / bs]) * bs + pos % bs;
      const float* row = ws.qkv.data() + (s.token_begin + i) * qkv_width;
      std::memcpy(k_cache + slot * kv_out, row + q_out, static_cast<size_t>(kv_out) * sizeof(float));
      std::memcpy(v_cache + slot * kv_out, row + q_out + kv_out, static_cast<size_t>(kv_out) * sizeof(float));
    }
  }

  // One work item per (sequence, token); items are independent.
  auto& items = ws.attention_items;
  items.clear();
  int64_t max_ctx = 0;
  for (const ForwardSeq& s : batch.seqs) {
    for (int64_t i = 0; i < s.num_tokens; ++i) items.emplace_back(&s, i);
    max_ctx = std::max(max_ctx, s.start_pos + s.num_tokens);
  }
  cpu::ThreadPool& pool = cpu::compute_pool();
  const int threads = pool.size();
  ensure(ws.scores, static_cast<size_t>(threads * max_ctx));
  const cpu::PagedKv kv{k_cache, v_cache, bs, c.num_key_value_heads, c.head_dim};
  const int64_t n_items = static_cast<int64_t>(items.size());
  // Items cost as much as their context is long: threads take them one at a time.
  std::atomic<int64_t> next_item{0};
  pool.run(static_cast<int>(std::clamp<int64_t>(n_items, 1, threads)), [&](int thread, int) {
    float* scratch = ws.scores.data() + static_cast<int64_t>(thread) * max_ctx;
    for (int64_t it; (it = next_item.fetch_add(1, std::memory_order_relaxed)) < n_items;) {
      const auto [s, i] = items[it];
      const int64_t t = s->token_begin + i;
      const int64_t pos = s->start_pos + i;
      const int64_t first = c.sliding_window > 0 ? std::max<int64_t>(0, pos - c.sliding_window + 1) : 0;
      cpu::paged_attention_one(ws.qkv.data() + t * qkv_width, ws.attn.data() + t * q_out, c.num_attention_heads,
                               kv, s->block_table, first, pos, scratch);
    }
  });
}

Status LlamaModel::forward(const ForwardBatch& batch, KvCache& cache, ForwardWorkspace& ws, float* logits,
                           const LoraSlots* lora) const {
  const ModelConfig& c = config_;
  const int64_t T = batch.num_tokens();
  if (T == 0) return Status::ok();
  const int64_t h = c.hidden_size;
  const int64_t q_out = c.num_attention_heads * c.head_dim;
  const int64_t kv_out = c.num_key_value_heads * c.head_dim;
  const int64_t qkv_width = q_out + 2 * kv_out;
  const int64_t inter = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  for (int32_t tok : batch.tokens) {
    if (tok < 0 || tok >= c.vocab_size) {
      return Status::invalid_argument("token id " + std::to_string(tok) + " outside the vocabulary of " +
                                      std::to_string(c.vocab_size));
    }
  }
  for (const ForwardSeq& s : batch.seqs) {
    if (s.logits_begin < 0 || s.num_logits < 0 || s.logits_begin + s.num_logits > s.num_tokens) {
      return Status::invalid_argument("logits rows [" + std::to_string(s.logits_begin) + ", " +
                                      std::to_string(s.logits_begin + s.num_logits) + ") outside a chunk of " +
                                      std::to_string(s.num_tokens) + " tokens");
    }
  }

  ensure(ws.hidden, T * h);
  ensure(ws.normed, T * h);
  ensure(ws.qkv, T * qkv_width);
  ensure(ws.attn, T * q_out);
  ensure(ws.proj, T * h);
  ensure(ws.gate_up, T * 2 * inter);
  ensure(ws.act, T * inter);
  for (int64_t t = 0; t < T; ++t) weights_->embed(batch.tokens[t], ws.hidden.data() + t * h);
  compute_rope(batch, ws);

  // LoRA segments: runs of consecutive sequences on the same slot.
  ws.lora_segments.clear();
  if (lora != nullptr) {
    for (const ForwardSeq& s : batch.seqs) {
      if (s.lora_slot < 0) continue;
      if (!ws.lora_segments.empty() && ws.lora_segments.back().slot == s.lora_slot &&
          ws.lora_segments.back().token_begin + ws.lora_segments.back().num_tokens == s.token_begin) {
        ws.lora_segments.back().num_tokens += s.num_tokens;
      } else {
        ws.lora_segments.push_back({s.token_begin, s.num_tokens, s.lora_slot});
      }
    }
  }
  const int64_t num_segments = static_cast<int64_t>(ws.lora_segments.size());
  // y[:, col..] += LoRA(module)(x) for every segment, when any sequence has an adapter.
  auto add_lora = [&](int64_t layer, LoraModule m, const float* x, int64_t ldx, float* y, int64_t ldy) {
    if (num_segments == 0) return;
    cpu::lora_add(x, ldx, ws.lora_segments.data(), num_segments, lora->weights(layer, m), y, ldy);
  };
  // The same for projections reading the same x, in one fork/join.
  struct ModuleOut {
    LoraModule module;
    float* y;
  };
  auto add_loras = [&](int64_t layer, const float* x, int64_t ldx, std::initializer_list<ModuleOut> outs,
                       int64_t ldy) {
    if (num_segments == 0) return;
    cpu::LoraTarget targets[3];
    int n = 0;
    for (const ModuleOut& o : outs) targets[n++] = {lora->weights(layer, o.module), o.y, ldy};
    cpu::lora_add_targets(x, ldx, ws.lora_segments.data(), num_segments, targets, n);
  };

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = weights_->layers()[l];
    cpu::rmsnorm(ws.hidden.data(), lw.input_norm.data(), ws.normed.data(), T, h, eps);
    const auto layer = static_cast<size_t>(l);
    linear(ws.normed.data(), T, h, lw.qkv, ws.qkv.data(), qkv_width, layer);
    if (!lw.qkv_bias.empty()) cpu::add_bias(ws.qkv.data(), lw.qkv_bias.data(), T, qkv_width, qkv_width);
    add_loras(l, ws.normed.data(), h,
              {{LoraModule::kQ, ws.qkv.data()},
               {LoraModule::kK, ws.qkv.data() + q_out},
               {LoraModule::kV, ws.qkv.data() + q_out + kv_out}},
              qkv_width);
    // Rotate q and k in place (v, the last kv_out floats of a row, is left alone).
    cpu::rope_rotate_half(ws.qkv.data(), T, c.num_attention_heads, c.head_dim, qkv_width, ws.rope_cos.data(),
                          ws.rope_sin.data());
    cpu::rope_rotate_half(ws.qkv.data() + q_out, T, c.num_key_value_heads, c.head_dim, qkv_width,
                          ws.rope_cos.data(), ws.rope_sin.data());
    attention(batch, l, cache, ws);
    linear(ws.attn.data(), T, q_out, lw.o, ws.proj.data(), h, layer);
    add_lora(l, LoraModule::kO, ws.attn.data(), q_out, ws.proj.data(), h);
    cpu::add_inplace(ws.hidden.data(), ws.proj.data(), T * h);

    cpu::rmsnorm(ws.hidden.data(), lw.post_attn_norm.data(), ws.normed.data(), T, h, eps);
    linear(ws.normed.data(), T, h, lw.gate_up, ws.gate_up.data(), 2 * inter, layer);
    add_loras(l, ws.normed.data(), h,
              {{LoraModule::kGate, ws.gate_up.data()}, {LoraModule::kUp, ws.gate_up.data() + inter}}, 2 * inter);
    cpu::silu_mul(ws.gate_up.data(), ws.act.data(), T, inter);
    linear(ws.act.data(), T, inter, lw.down, ws.proj.data(), h, layer);
    add_lora(l, LoraModule::kDown, ws.act.data(), inter, ws.proj.data(), h);
    cpu::add_inplace(ws.hidden.data(), ws.proj.data(), T * h);
  }

  // Final norm of the wanted rows only, gathered in order, then one lm_head matmul over all of them.
  int64_t rows = 0;
  for (const ForwardSeq& s : batch.seqs) {
    if (s.num_logits == 0) continue;
    const int64_t first = s.token_begin + s.logits_begin;
    cpu::rmsnorm(ws.hidden.data() + first * h, weights_->final_norm().data(), ws.normed.data() + rows * h,
                 s.num_logits, h, eps);
    rows += s.num_logits;
  }
  if (rows > 0) {
    linear(ws.normed.data(), rows, h, weights_->lm_head(), logits, c.vocab_size,
           static_cast<size_t>(c.num_hidden_layers));
  }
  return Status::ok();
}

}  // namespace loragate

// Rotary-embedding tables, shared by every model runner so that each
// rotates by the same f32 values: inverse frequencies as Hugging Face
// computes them (linear or llama3 scaling applied) and cos/sin per token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace loragate {

// [head_dim / 2] inverse frequencies of `config`.
std::vector<float> rope_inv_freq(const ModelConfig& config);

// cos[t * half + j] and sin[...] of positions[t] * inv_freq[j] for t < tokens.
void rope_tables(const std::vector<float>& inv_freq, const int32_t* positions, size_t tokens, float* cos,
                 float* sin);

}  // namespace loragate

// Token embedding lookup on the GPU: out[t, :] = f32(table[ids[t], :]) for a
// bf16 table (raw uint16_t bits, [vocab, hidden]). Pointers are device memory.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// The ids live on the device, so they cannot be checked here: the engine
// validates every id against the vocabulary before it reaches the model. As a
// guard against reading out of bounds, a row whose id is outside [0, vocab)
// is written as zeros. Launches on `stream` and returns at once.
Status embedding_bf16(const uint16_t* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t tokens,
                      float* out, void* stream);

}  // namespace loragate::cuda

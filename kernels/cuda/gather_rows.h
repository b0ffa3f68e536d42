// Row gather on the GPU: dst[i, :] = src[rows[i], :]. The runner takes the
// hidden states of the tokens whose logits are wanted this way, so the final
// norm and the lm_head run over those rows only.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace loragate::cuda {

// src: rows of `width` floats, `ld_src` apart, `src_rows` of them; rows: [n]
// device indices; dst: [n, width] contiguous. An index outside [0, src_rows)
// writes a row of zeros (the indices live on the device and are not checked
// here). Launches on `stream` and returns at once.
Status gather_rows(const float* src, int64_t ld_src, int64_t src_rows, const int32_t* rows, int64_t n, int64_t width,
                   float* dst, void* stream);

}  // namespace loragate::cuda

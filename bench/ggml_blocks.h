// ggml's tensor element types that the GGUF writer emits, and the encoders of
// its two block-quantised types, Q4_0 and Q8_0, byte for byte as ggml reads
// them (ggml/src/ggml-common.h):
//
//  - Q4_0: blocks of 32 values, 18 bytes: an f16 scale d, then 16 bytes of
//    4-bit levels q in [0, 15], w = d * (q - 8). Byte j holds value j in its
//    low nibble and value j + 16 in its high nibble (not 2j and 2j + 1).
//  - Q8_0: blocks of 32 values, 34 bytes: an f16 scale d, then 32 int8 q,
//    w = d * q.
//
// A quantised row must hold a whole number of blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace loragate::bench {

// The values are ggml's enum ggml_type, as stored in a GGUF tensor info.
enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kBF16 = 30 };

inline constexpr int64_t kGgmlBlockValues = 32;  // values per Q4_0 or Q8_0 block

std::string_view ggml_type_name(GgmlType t);  // "F32", "Q4_0", ...
bool is_block_quantised(GgmlType t);
// Bytes of a row of `n` values (n a multiple of kGgmlBlockValues for block types).
size_t ggml_row_bytes(GgmlType t, int64_t n);

// Encodes `n` floats as `t` into `out` (ggml_row_bytes(t, n) bytes).
// n must be a multiple of kGgmlBlockValues for the block types.
void encode_ggml_row(GgmlType t, const float* x, int64_t n, uint8_t* out);

}  // namespace loragate::bench

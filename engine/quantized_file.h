// The weight matrices of a model directory written by `loragate quantize`:
// already quantised, so a quantised base loads without quantising (a copy
// per weight instead of a search for its scale) and, being its own file,
// has its own sha256 identity.
//
// Format (model.safetensors; `__metadata__` "loragate.format" =
// kQuantizedFormat, "loragate.dtype" = the weight type, and for int4
// "loragate.group_size" = 32 or 64). Per linear weight W [N, K] (the
// q/k/v/o/gate/up/down projections and lm_head, which is written even when
// the config ties it to the embeddings):
//   NAME.weight       int8: I8 [N, K], q in [-127, 127]
//                     int4: U8 [N, ceil(K / 2)], level u in [0, 15], even k
//                     in the low nibble (a last odd k leaves the high one 0)
//   NAME.weight_scale int8: F32 [N]; int4: F16 [N, ceil(K / group)]; finite, >= 0
//   NAME.weight_min   int4 asymmetric: F16 [N, ceil(K / group)]; finite
// with the meaning of kernels/cpu/quantize.h. The embedding table is BF16 (a
// quantised base keeps it so), norms and biases F32. config.json and the
// tokenizer files are copied unchanged.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/weight_type.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "kernels/cpu/matmul.h"

namespace loragate {

inline constexpr const char* kQuantizedFormat = "loragate-quantized-v1";

// The weight type a directory's weights were quantised to, or nullopt for
// float weights. Refuses an unknown format, a type that is not quantised
// and a group size that disagrees with the type, naming the key.
Result<std::optional<WeightType>> quantized_file_type(const WeightStore& store);

// Whether weights quantised as `file` can be held as `storage`: the same
// type, or int8 <-> int8-outlier (one layout). The error says what to do.
Status check_quantized_storage(WeightType file, WeightType storage, const std::string& dir);

// The matrix stacked from the quantised weights `parts` (each [rows_i,
// cols]) of a file of type `file`, packed as `storage`. Every tensor's dtype,
// shape, levels and scales are checked first; the error names the tensor.
Result<cpu::PackedMatrix> pack_quantized_file_matrix(const WeightStore& store,
                                                     const std::vector<LinearTensor>& parts, WeightType file,
                                                     WeightType storage);

}  // namespace loragate

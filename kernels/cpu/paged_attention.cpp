// The kernel is written once for every ISA in lane_kernels.h.
#include "kernels/cpu/paged_attention.h"

#include "kernels/cpu/ops_internal.h"

namespace loragate::cpu {

void paged_attention_one(const float* q, float* out, int64_t num_heads, const PagedKv& kv,
                         const int32_t* block_table, int64_t first_pos, int64_t last_pos, float* scratch) {
  detail::ops().paged_attention_one(q, out, num_heads, kv, block_table, first_pos, last_pos, scratch);
}

}  // namespace loragate::cpu

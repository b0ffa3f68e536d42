// The one choice of kernel table, made from best_isa() (so LORAGATE_ISA can
// force a lower path), for vec.h, ops.h and paged_attention.h.
#include "kernels/cpu/ops_internal.h"

namespace loragate::cpu::detail {

const CpuOps& ops_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return avx512_ops();
    case Isa::kAvx2: return avx2_ops();
    case Isa::kScalar: break;
  }
  return scalar_ops();
}

const CpuOps& ops() {
  static const CpuOps& table = ops_for(best_isa());
  return table;
}

}  // namespace loragate::cpu::detail

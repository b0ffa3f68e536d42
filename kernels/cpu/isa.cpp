#include "kernels/cpu/isa.h"

#include <cstdio>
#include <cstdlib>

namespace loragate::cpu {
namespace {

Isa cpu_best() {
  static const Isa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
      return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
    return Isa::kScalar;
  }();
  return isa;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kScalar: return "scalar";
  }
  return "?";
}

// The ISAs are ordered: a CPU that runs one runs every lower one.
bool cpu_supports(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(cpu_best()); }

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (cpu_supports(isa)) out.push_back(isa);
  }
  return out;
}

Result<Isa> isa_from_env() {
  const char* env = std::getenv("LORAGATE_ISA");
  if (env == nullptr || *env == '\0') return cpu_best();
  const std::string want = env;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (want != isa_name(isa)) continue;
    if (!cpu_supports(isa)) {
      return Status::invalid_argument("LORAGATE_ISA=" + want + ": this CPU lacks the instructions (its best is " +
                                      isa_name(cpu_best()) + ")");
    }
    return isa;
  }
  return Status::invalid_argument("LORAGATE_ISA=" + want + ": expected avx512, avx2 or scalar");
}

Isa best_isa() {
  static const Isa isa = [] {
    Result<Isa> forced = isa_from_env();
    if (forced.is_ok()) return *forced;
    std::fprintf(stderr, "loragate: %s; using %s\n", forced.status().message().c_str(), isa_name(cpu_best()));
    return cpu_best();
  }();
  return isa;
}

}  // namespace loragate::cpu

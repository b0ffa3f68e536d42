// The instruction sets the CPU kernels are written for, and the one dispatch
// every kernel follows: best_isa() is the best this CPU runs, unless the
// environment variable LORAGATE_ISA (avx512 | avx2 | scalar) asks for a lower
// one — so an AVX-512 machine can test and benchmark the AVX2 path too.
//
// Every kernel gives bit-identical results on every ISA (each fixes one
// operation order per output and the vector paths follow it lane for lane),
// so forcing a path changes speed, never outputs.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace loragate::cpu {

enum class Isa { kScalar, kAvx2, kAvx512 };

const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512"

// Whether this CPU can run the kernels built for `isa`.
bool cpu_supports(Isa isa);

// Every ISA this CPU can run, scalar first: what tests iterate over.
std::vector<Isa> supported_isas();

// What LORAGATE_ISA asks for: the CPU's best when unset; an error naming the
// value when it is unknown or needs instructions this CPU lacks.
Result<Isa> isa_from_env();

// The ISA every kernel dispatches to (isa_from_env(), read once; an invalid
// value falls back to the CPU's best after one message on stderr — the
// engine refuses to load with it, see Engine::load).
Isa best_isa();

}  // namespace loragate::cpu

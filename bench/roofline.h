// Machine probes measured in the same run as a benchmark, so figures can be
// reported as a fraction of what this machine can do right now.
#pragma once

namespace loragate::bench {

// STREAM-triad (a[i] = b[i] + s * c[i]) bandwidth in GB/s with `threads`
// threads over arrays far larger than the caches; counts the bytes of
// 3 f32 arrays (2 read, 1 written) per element. Median of `reps`.
double measure_triad_gbps(int threads, int reps = 7);

// The threads the engine's compute pool runs with: the count to probe with
// when the figures put in context come from an engine or a server.
int engine_threads();

// Peak f32 FMA rate in GFLOP/s (2 flops per FMA lane) with `threads` threads,
// using the widest vector FMA this machine has. Median of `reps`.
double measure_peak_fma_gflops(int threads, int reps = 5);

}  // namespace loragate::bench

// `loragate bench serve-gap`: what serving over HTTP costs next to the engine
// itself, on the same concurrent long-generation load.
//
// The engine side runs an Engine in an EngineLoop in this process, configured
// as `loragate serve` configures its base (the same EngineOptions, ComputeGate
// and compute threads); the HTTP side runs `loragate serve` (this binary) as
// a child process on loopback with the same model, dtype and adapters, and
// sends non-streaming /v1/completions (streamed ones with `stream`). Each
// side gets the same N requests at once (token-id prompts, greedy, EOS
// ignored, exactly new_tokens each, adapters round-robin) and is timed from
// the first submit to the last answer. The sides alternate within every
// repetition, both stay loaded throughout, and the report gives per-side
// medians, min and max, the HTTP/engine ratio, each process's CPU time by
// thread, and checks that both sides generated the same tokens.
#pragma once

#include <string>

#include "common/status.h"

namespace loragate::bench {

struct ServeGapOptions {
  std::string model_dir;
  std::string dtype = "bf16";     // f32 or bf16
  int requests = 8;               // concurrent requests per run
  int prompt_len = 32;            // token ids
  int new_tokens = 64;            // generated per request
  int adapters = 0;               // 0: the base alone; K: K distinct rank-16 adapters, round-robin
  std::string adapters_dir = "/tmp/lgb/serve-gap-adapters";  // synthetic adapters, written when missing
  int reps = 5;
  int port = 0;                   // the child's port; 0 = one the kernel picks
  std::string executable;         // the loragate binary to serve with; "" = this one (/proc/self/exe)
  bool stream = false;            // the HTTP side streams (SSE, a write per token) instead
  bool thread_usage = true;       // print CPU time by thread for both sides
};

Status run_serve_gap_bench(const ServeGapOptions& options);

}  // namespace loragate::bench

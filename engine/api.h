// engine/api.h: all that the rooms above the engine (bases/, evaluator/,
// gateway/) see of it —
//   engine_types.h    a request, its result and sink, the options and stats;
//   engine_loop.h     a running engine to submit to and cancel on, with the
//                     model directory it serves (config, tokenizer, chat
//                     template, identity) and its adapters as a catalog;
//   compute_gate.h    the compute pool that bases share, serving base first;
//   memory_estimate.h what a load will take and what a loaded engine holds.
// The scheduler, KV blocks, runners and kernels stay behind it: the layering
// test (tests/layering) fails when a room above reaches one of them.
#pragma once

#include "engine/compute_gate.h"
#include "engine/engine_loop.h"
#include "engine/engine_types.h"
#include "engine/memory_estimate.h"

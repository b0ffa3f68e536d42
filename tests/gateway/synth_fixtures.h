// The gateway tests' fixtures. They serve ../shared's stories260K when it is
// there, and otherwise (or with LORAGATE_GATEWAY_FIXTURES=synth) a synthetic
// stand-in laid out as ../shared/models is: a tiny seeded model
// (models/stories260K), adapters models/stories260K-lora/{a,b,c}, and
// models/golden.json with the greedy continuations this process's engine
// computed. Either way the gateway tests check that HTTP serves what the
// engine generates; the engine's golden tests compare it with the reference.
#pragma once

#include <string>

#include "tests/test_util.h"

namespace loragate::testing {

// The folder that stands in for ../shared in the gateway tests; the synthetic
// one is built once per process under the temporary directory (a failure
// aborts, saying why) and removed at exit.
const std::string& gateway_fixture_dir();

// True when gateway_fixture_dir() is ../shared, false for the synthetic stand-in.
bool gateway_serves_stories260k();

}  // namespace loragate::testing

// For the few tests that check stories260K itself (reference logprobs, its
// text, its size, its speed): a missing ../shared is a missing fixture (it
// fails under CI=true); a synthetic model chosen on purpose skips them.
#define LG_REQUIRE_STORIES260K()                                                              \
  do {                                                                                        \
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");                               \
    if (!::loragate::testing::gateway_serves_stories260k())                                   \
      GTEST_SKIP() << "checks stories260K itself; LORAGATE_GATEWAY_FIXTURES=synth serves the " \
                      "synthetic model";                                                      \
  } while (0)

// Fixtures for the trainer tests: a small synthetic Llama shape.
#pragma once

#include "model/model_config.h"

namespace loragate::testing {

// hidden 32, intermediate 48, 3 layers, 4 heads of 8, 2 KV heads:
// q 32->32, k/v 32->16, o 32->32, gate/up 32->48, down 48->32.
inline ModelConfig small_train_base() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 64;
  return c;
}

}  // namespace loragate::testing

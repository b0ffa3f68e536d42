// How close two bases' weights are, module by module: what decides whether an
// adapter carried over from one to the other still holds (PortLLM: a copied
// adapter keeps working between bases whose weights are close, and how well
// tracks how close). Shown beside each transfer's outcome, so an operator
// sees why it held or not.
//
// Per linear weight present in both bases with the same shape: the relative
// Frobenius distance ||W_b - W_a|| / ||W_a|| and the cosine
// <W_a, W_b> / (||W_a|| ||W_b||), summarised per module (q_proj, ..., down_proj,
// lm_head, embed_tokens) over the layers. Float tensors only (f32, f16,
// bf16); a quantised file's levels are not weights and are left out.
//
// Pure functions over mapped files; read the whole of both bases once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/safetensors.h"

namespace loragate::eval {

struct ModuleSimilarity {
  std::string module;             // "q_proj", "down_proj", "lm_head", ...
  int64_t tensors = 0;            // weights compared (one per layer)
  double rel_frobenius_mean = 0;  // mean over the layers of ||W_b - W_a|| / ||W_a||
  double rel_frobenius_max = 0;
  double cosine_mean = 0;         // mean over the layers of the cosine
  double cosine_min = 0;
};

struct BaseSimilarity {
  std::vector<ModuleSimilarity> modules;  // in the order first met
  double rel_frobenius = 0;               // over every compared weight at once: ||B - A|| / ||A||
  std::string unavailable;                // why nothing was compared ("" when something was)
};

BaseSimilarity compare_bases(const WeightStore& a, const WeightStore& b);
nlohmann::json similarity_json(const BaseSimilarity& s);

}  // namespace loragate::eval

#include "adapters/synth_adapter.h"

#include <cmath>
#include <vector>

#include "adapters/peft_writer.h"
#include "common/random.h"

namespace loragate {
namespace {

std::vector<float> normal_values(const std::string& name, int64_t count, double stddev, uint64_t seed) {
  NormalGen gen(seed ^ fnv1a64(name));
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = static_cast<float>(gen.next() * stddev);
  return v;
}

}  // namespace

Status write_synth_adapter(const std::string& out_dir, const ModelConfig& base, const SynthAdapterOptions& o) {
  if (o.rank <= 0) return Status::invalid_argument("adapter rank must be > 0");
  if (o.targets.empty()) return Status::invalid_argument("an adapter needs at least one target module");

  // The values live here; the PeftTensors only point at them.
  std::vector<std::vector<float>> values;
  std::vector<PeftTensor> tensors;
  values.reserve(static_cast<size_t>(2 * base.num_hidden_layers) * o.targets.size());
  for (int64_t layer = 0; layer < base.num_hidden_layers; ++layer) {
    for (LoraModule m : o.targets) {
      const int64_t in = in_features(m, base), out = out_features(m, base);
      const std::string a = lora_tensor_name(layer, m, true), b = lora_tensor_name(layer, m, false);
      values.push_back(normal_values(a, o.rank * in, 1.0 / std::sqrt(double(in)), o.seed));
      tensors.push_back({a, {o.rank, in}, values.back()});
      values.push_back(normal_values(b, out * o.rank, o.b_std, o.seed));
      tensors.push_back({b, {out, o.rank}, values.back()});
    }
  }
  PeftAdapterSpec spec;
  spec.rank = o.rank;
  spec.lora_alpha = o.lora_alpha;
  spec.targets = o.targets;
  spec.base_model_name_or_path = "synthetic";
  return write_peft_adapter(out_dir, spec, tensors);
}

}  // namespace loragate

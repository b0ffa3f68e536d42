// LoraAdapter: loading a PEFT adapter directory and validating it against a base.
#include "adapters/lora_adapter.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "adapters/adapter_dir.h"
#include "common/dtype.h"
#include "common/sha256.h"
#include "model/safetensors.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kLayersPrefix = "base_model.model.model.layers.";

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// What one adapter tensor is for.
struct TensorKey {
  int64_t layer = 0;
  LoraModule module = LoraModule::kQ;
  bool is_a = true;  // lora_A (else lora_B)
};

// Classifies `name` (a tensor of `file`): a LoRA A or B of one of the seven
// modules in a layer below `num_layers`, or an error naming the tensor.
Result<TensorKey> parse_tensor_name(const std::string& name, const std::string& file,
                                    int64_t num_layers) {
  const std::string where = file + ": tensor '" + name + "'";
  if (contains(name, "lora_magnitude_vector")) {
    return Status::unsupported(where + " is a DoRA magnitude vector; DoRA adapters are not supported");
  }
  if (contains(name, "lora_embedding_A") || contains(name, "lora_embedding_B") ||
      contains(name, "embed_tokens")) {
    return Status::unsupported(where + " adapts the token embeddings; LoRA on embed_tokens is not supported");
  }
  if (contains(name, "lm_head")) {
    return Status::unsupported(where + " adapts lm_head; LoRA on the output head is not supported");
  }
  if (name.ends_with(".lora_A.bias") || name.ends_with(".lora_B.bias")) {
    return Status::unsupported(where + " is a LoRA bias (lora_bias); it is not supported");
  }
  const Status unexpected = Status::corrupt(
      where + " is not a LoRA weight; expected "
              "'base_model.model.model.layers.<N>.<self_attn|mlp>.<module>.lora_<A|B>.weight'");
  if (!name.starts_with(kLayersPrefix)) return unexpected;
  // <N>.<block>.<module>.lora_<A|B>[.default].weight
  const std::vector<std::string_view> parts = split_dots(std::string_view(name).substr(kLayersPrefix.size()));
  if (parts.size() != 5 && parts.size() != 6) return unexpected;
  if (parts.back() != "weight" || (parts.size() == 6 && parts[4] != "default")) return unexpected;
  if (parts[3] != "lora_A" && parts[3] != "lora_B") return unexpected;

  TensorKey key;
  key.is_a = parts[3] == "lora_A";
  const std::string_view n = parts[0];
  if (n.empty() || n.size() > 9 || (n.size() > 1 && n[0] == '0')) return unexpected;
  const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), key.layer);
  if (ec != std::errc() || end != n.data() + n.size()) return unexpected;

  const std::optional<LoraModule> module = lora_module_from_name(parts[2]);
  if (!module) {
    return Status::unsupported(where + " adapts module '" + std::string(parts[2]) +
                               "'; LoRA is supported on " + lora_module_names_list() + " only");
  }
  key.module = *module;
  if (parts[1] != lora_module_block(*module)) {
    return Status::corrupt(where + ": " + std::string(parts[2]) + " belongs under '" +
                           std::string(lora_module_block(*module)) + "', not '" +
                           std::string(parts[1]) + "'");
  }
  if (key.layer >= num_layers) {
    return Status::invalid_argument(where + " is for layer " + std::to_string(key.layer) +
                                    ", but the base model has " + std::to_string(num_layers) +
                                    " layers (0.." + std::to_string(num_layers - 1) + ")");
  }
  return key;
}

// Checks `t` has shape {rank_dim…} as expected and converts it to f32.
// A wrong rank dimension disagrees with adapter_config.json (corrupt); a wrong
// feature dimension means the adapter was trained for another base.
Status read_matrix(const TensorView& t, const std::vector<int64_t>& want, int rank_axis,
                   const std::string& config_source, std::vector<float>* out) {
  const std::string where = t.file + ": tensor '" + t.name + "'";
  if (t.shape != want) {
    if (t.shape.size() == 2 && t.shape[rank_axis] != want[rank_axis]) {
      return Status::corrupt(where + " has shape " + shape_str(t.shape) + ", expected " +
                             shape_str(want) + ": its rank " + std::to_string(t.shape[rank_axis]) +
                             " disagrees with r=" + std::to_string(want[rank_axis]) + " in " +
                             config_source);
    }
    return Status::invalid_argument(where + " has shape " + shape_str(t.shape) + ", expected " +
                                    shape_str(want) + " for this base model (was the adapter "
                                    "trained for another base?)");
  }
  if (!is_float_dtype(t.dtype)) {
    return Status::invalid_argument(where + " is " + std::string(dtype_name(t.dtype)) +
                                    ", expected a float tensor (F32, F16 or BF16)");
  }
  const size_t n = static_cast<size_t>(want[0] * want[1]);
  out->resize(n);
  convert_to_f32(t.dtype, t.data, out->data(), n);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite((*out)[i])) {
      return Status::corrupt(where + " has a non-finite value at element " + std::to_string(i));
    }
  }
  return Status::ok();
}

// The weights' sha256 and, per targeted (layer, module), its rank and
// scaling: adapter_config.json's lora_alpha changes the output as much as
// the weights do, and it is not in adapter_model.safetensors.
std::string kv_identity_of(const LoraAdapter& adapter) {
  std::string text = adapter.weights_sha256();
  char buf[96];
  for (int64_t layer = 0; layer < adapter.num_layers(); ++layer) {
    for (LoraModule m : kAllLoraModules) {
      const LoraWeights* w = adapter.weights(layer, m);
      if (w == nullptr) continue;
      uint32_t scaling_bits;
      static_assert(sizeof scaling_bits == sizeof w->scaling);
      std::memcpy(&scaling_bits, &w->scaling, sizeof scaling_bits);
      std::snprintf(buf, sizeof buf, "|%lld.%d:%lld:%08x", static_cast<long long>(layer),
                    static_cast<int>(lora_module_index(m)), static_cast<long long>(w->rank), scaling_bits);
      text += buf;
    }
  }
  return sha256_hex(text);
}

}  // namespace

Result<std::shared_ptr<const LoraAdapter>> LoraAdapter::load(const std::string& dir,
                                                             const ModelConfig& base,
                                                             int64_t max_rank, const std::string& confined_to) {
  LG_ASSIGN_OR_RETURN(AdapterDir files, AdapterDir::open(dir, confined_to));
  if (max_rank <= 0) {
    return Status::invalid_argument("max_rank must be positive, got " + std::to_string(max_rank));
  }
  const int64_t num_layers = base.num_hidden_layers;
  LG_ASSIGN_OR_RETURN(PeftConfig config, PeftConfig::load(files));

  // The config against the base: layer indices, ranks, and at least one target.
  for (int64_t layer : config.layers_to_transform()) {
    if (layer >= num_layers) {
      return Status::invalid_argument(config.source() + ": key 'layers_to_transform' lists layer " +
                                      std::to_string(layer) + ", but the base model has " +
                                      std::to_string(num_layers) + " layers");
    }
  }
  int64_t num_targets = 0;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    for (LoraModule m : kAllLoraModules) {
      const std::optional<LoraTarget> t = config.target(layer, m);
      if (!t) continue;
      ++num_targets;
      if (t->rank > max_rank) {
        return Status::invalid_argument(config.source() + ": " + lora_module_path(layer, m) +
                                        " has rank " + std::to_string(t->rank) +
                                        ", above max_rank " + std::to_string(max_rank) +
                                        " (raise the server's max LoRA rank to load it)");
      }
    }
  }
  if (num_targets == 0) {
    return Status::invalid_argument(config.source() +
                                    ": target_modules selects no module of this base model");
  }

  if (!files.has("adapter_model.safetensors") && files.has("adapter_model.bin")) {
    return Status::unsupported((fs::path(dir) / "adapter_model.bin").string() +
                               ": pickle .bin adapters are not supported; convert to safetensors");
  }
  LG_ASSIGN_OR_RETURN(const std::string weights_path, files.file("adapter_model.safetensors"));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(weights_path));
  // The identity the registry keeps, of exactly the bytes parsed below.
  std::string weights_sha256 = sha256_hex(file->bytes());

  // Every tensor must be the A or B of a targeted (layer, module), once.
  struct Pair {
    const TensorView* a = nullptr;
    const TensorView* b = nullptr;
  };
  std::vector<std::array<Pair, kLoraModuleCount>> found(static_cast<size_t>(num_layers));
  for (const TensorView& t : file->tensors()) {
    LG_ASSIGN_OR_RETURN(TensorKey key, parse_tensor_name(t.name, file->path(), num_layers));
    if (!config.target(key.layer, key.module)) {
      return Status::corrupt(file->path() + ": tensor '" + t.name + "' is for " +
                             lora_module_path(key.layer, key.module) + ", which " +
                             config.source() + " does not target");
    }
    Pair& pair = found[static_cast<size_t>(key.layer)][lora_module_index(key.module)];
    const TensorView*& slot = key.is_a ? pair.a : pair.b;
    if (slot) {
      return Status::corrupt(file->path() + ": tensors '" + slot->name + "' and '" + t.name +
                             "' are the same LoRA weight");
    }
    slot = &t;
  }

  auto adapter = std::shared_ptr<LoraAdapter>(new LoraAdapter(config));
  fs::path p(dir);
  if (p.filename().empty()) p = p.parent_path();
  adapter->name_ = p.filename().string();
  adapter->path_ = dir;
  adapter->weights_sha256_ = std::move(weights_sha256);
  adapter->layers_.resize(static_cast<size_t>(num_layers));
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    for (LoraModule m : kAllLoraModules) {
      const std::optional<LoraTarget> t = config.target(layer, m);
      if (!t) continue;
      const Pair& pair = found[static_cast<size_t>(layer)][lora_module_index(m)];
      for (bool is_a : {true, false}) {
        if (!(is_a ? pair.a : pair.b)) {
          return Status::corrupt(file->path() + ": missing tensor '" + lora_tensor_name(layer, m, is_a) +
                                 "' (" + config.source() + " targets " + lora_module_path(layer, m) +
                                 ")");
        }
      }
      LoraWeights w;
      w.rank = t->rank;
      w.scaling = t->scaling;
      w.in = in_features(m, base);
      w.out = out_features(m, base);
      LG_RETURN_IF_ERROR(read_matrix(*pair.a, {w.rank, w.in}, 0, config.source(), &w.a));
      LG_RETURN_IF_ERROR(read_matrix(*pair.b, {w.out, w.rank}, 1, config.source(), &w.b));
      adapter->bytes_ += w.bytes();
      adapter->max_rank_ = std::max(adapter->max_rank_, w.rank);
      ++adapter->num_targets_;
      adapter->layers_[static_cast<size_t>(layer)][lora_module_index(m)] = std::move(w);
    }
  }
  adapter->kv_identity_ = kv_identity_of(*adapter);
  return std::shared_ptr<const LoraAdapter>(std::move(adapter));
}

const LoraWeights* LoraAdapter::weights(int64_t layer, LoraModule module) const {
  if (layer < 0 || layer >= num_layers()) return nullptr;
  const std::optional<LoraWeights>& w = layers_[static_cast<size_t>(layer)][lora_module_index(module)];
  return w ? &*w : nullptr;
}

}  // namespace loragate

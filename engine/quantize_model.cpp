#include "engine/quantize_model.h"

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/dtype.h"
#include "common/sha256.h"
#include "model/model_dir.h"
#include "model/safetensors.h"
#include "engine/quantized_file.h"
#include "kernels/cpu/quantize.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;

// One tensor of the output: a float tensor converted to `dtype`, or one
// part of a quantised linear weight (levels, scales or minimums).
struct OutputTensor {
  enum class Kind { kFloat, kLevels, kScales, kMins };
  Kind kind = Kind::kFloat;
  TensorSpec spec;
  const TensorView* source = nullptr;  // the file's tensor it is made from
};

// The output tensors in file order: embeddings (bf16), per layer the norms,
// biases and seven quantised projections, the final norm and the lm_head.
Result<std::vector<OutputTensor>> output_tensors(const WeightStore& store, const ModelConfig& c, WeightType t) {
  std::vector<OutputTensor> out;
  auto add_float = [&](const std::string& name, DType dtype, std::vector<int64_t> shape) -> Status {
    LG_ASSIGN_OR_RETURN(const TensorView* src, store.require(name, shape));
    out.push_back({OutputTensor::Kind::kFloat, {name, dtype, std::move(shape)}, src});
    return Status::ok();
  };
  auto add_linear = [&](const LinearTensor& l, const std::string& source_name) -> Status {
    LG_ASSIGN_OR_RETURN(const TensorView* src, store.require(source_name, {l.rows, l.cols}));
    if (is_int8(t)) {
      out.push_back({OutputTensor::Kind::kLevels, {l.name, DType::kI8, {l.rows, l.cols}}, src});
      out.push_back({OutputTensor::Kind::kScales, {l.name + "_scale", DType::kF32, {l.rows}}, src});
      return Status::ok();
    }
    const int64_t groups = (l.cols + int4_group(t) - 1) / int4_group(t);
    out.push_back({OutputTensor::Kind::kLevels, {l.name, DType::kU8, {l.rows, (l.cols + 1) / 2}}, src});
    out.push_back({OutputTensor::Kind::kScales, {l.name + "_scale", DType::kF16, {l.rows, groups}}, src});
    if (int4_asymmetric(t)) {
      out.push_back({OutputTensor::Kind::kMins, {l.name + "_min", DType::kF16, {l.rows, groups}}, src});
    }
    return Status::ok();
  };

  LG_ASSIGN_OR_RETURN(const CheckpointLayout layout, checkpoint_layout(c, store));
  LG_RETURN_IF_ERROR(add_float(layout.embed.name, DType::kBF16, layout.embed.shape));
  for (const LayerTensors& l : layout.layers) {
    LG_RETURN_IF_ERROR(add_float(l.input_norm.name, DType::kF32, l.input_norm.shape));
    LG_RETURN_IF_ERROR(add_float(l.post_attention_norm.name, DType::kF32, l.post_attention_norm.shape));
    for (const TensorRef& bias : l.qkv_bias) LG_RETURN_IF_ERROR(add_float(bias.name, DType::kF32, bias.shape));
    for (const LinearTensor& lin : l.qkv) LG_RETURN_IF_ERROR(add_linear(lin, lin.name));
    LG_RETURN_IF_ERROR(add_linear(l.o, l.o.name));
    for (const LinearTensor& lin : l.gate_up) LG_RETURN_IF_ERROR(add_linear(lin, lin.name));
    LG_RETURN_IF_ERROR(add_linear(l.down, l.down.name));
  }
  LG_RETURN_IF_ERROR(add_float(layout.final_norm.name, DType::kF32, layout.final_norm.shape));
  // A tied lm_head is written as its own tensor, so loading needs no tie.
  LG_RETURN_IF_ERROR(add_linear(layout.lm_head, layout.lm_head_source == LmHeadSource::kOwnTensor
                                                    ? layout.lm_head.name
                                                    : layout.embed.name));
  return out;
}

// Appends a float tensor converted to its output dtype (F32 or BF16), a chunk of rows at a time.
Status write_float(SafetensorsWriter& writer, const WeightStore& store, const OutputTensor& t) {
  const TensorView& src = *t.source;
  const int64_t cols = src.shape.size() == 2 ? src.shape[1] : src.numel();
  const int64_t rows = src.numel() / std::max<int64_t>(cols, 1);
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<uint16_t> bf16(static_cast<size_t>(cols));
  const size_t src_row_bytes = static_cast<size_t>(cols) * dtype_size(src.dtype);
  for (int64_t r = 0; r < rows; ++r) {
    convert_to_f32(src.dtype, src.data + static_cast<size_t>(r) * src_row_bytes, row.data(), row.size());
    if (t.spec.dtype == DType::kF32) {
      LG_RETURN_IF_ERROR(writer.append(row.data(), row.size() * sizeof(float)));
    } else {
      for (size_t k = 0; k < row.size(); ++k) bf16[k] = f32_to_bf16(row[k]);
      LG_RETURN_IF_ERROR(writer.append(bf16.data(), bf16.size() * sizeof(uint16_t)));
    }
  }
  store.release(src.data, src.nbytes);
  return Status::ok();
}

// A linear weight quantised whole: its levels, scales and minimums as the file stores them.
struct QuantizedTensorBytes {
  std::vector<uint8_t> levels, scales, mins;
};

QuantizedTensorBytes quantize_tensor(const WeightStore& store, const TensorView& src, WeightType t) {
  const int64_t rows = src.shape[0], cols = src.shape[1];
  const int64_t level_row_bytes = is_int8(t) ? cols : (cols + 1) / 2;
  QuantizedTensorBytes out;
  out.levels.resize(static_cast<size_t>(rows * level_row_bytes));
  std::vector<float> row(static_cast<size_t>(cols));
  cpu::QuantizedRow q;
  const size_t src_row_bytes = static_cast<size_t>(cols) * dtype_size(src.dtype);
  for (int64_t r = 0; r < rows; ++r) {
    convert_to_f32(src.dtype, src.data + static_cast<size_t>(r) * src_row_bytes, row.data(), row.size());
    cpu::quantize_row(t, row.data(), cols, q);
    uint8_t* levels = out.levels.data() + r * level_row_bytes;
    if (is_int8(t)) {
      std::copy(q.levels.begin(), q.levels.end(), levels);
      const auto* s = reinterpret_cast<const uint8_t*>(&q.scale);
      out.scales.insert(out.scales.end(), s, s + sizeof(float));
      continue;
    }
    for (int64_t k = 0; k < cols; ++k) {
      levels[k / 2] |= static_cast<uint8_t>(q.levels[static_cast<size_t>(k)] << ((k % 2) * 4));
    }
    const auto* s = reinterpret_cast<const uint8_t*>(q.group_scales.data());
    out.scales.insert(out.scales.end(), s, s + q.group_scales.size() * 2);
    const auto* m = reinterpret_cast<const uint8_t*>(q.group_mins.data());
    out.mins.insert(out.mins.end(), m, m + q.group_mins.size() * 2);
  }
  store.release(src.data, src.nbytes);
  return out;
}

Status write_weights(const std::string& path, const WeightStore& store, const std::vector<OutputTensor>& tensors,
                     WeightType t, const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  for (const OutputTensor& o : tensors) specs.push_back(o.spec);
  LG_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWriter> writer,
                      SafetensorsWriter::create(path, std::move(specs), metadata));
  QuantizedTensorBytes current;  // of the linear weight whose parts are being written
  for (const OutputTensor& o : tensors) {
    switch (o.kind) {
      case OutputTensor::Kind::kFloat: LG_RETURN_IF_ERROR(write_float(*writer, store, o)); break;
      case OutputTensor::Kind::kLevels:
        current = quantize_tensor(store, *o.source, t);
        LG_RETURN_IF_ERROR(writer->append(current.levels.data(), current.levels.size()));
        break;
      case OutputTensor::Kind::kScales:
        LG_RETURN_IF_ERROR(writer->append(current.scales.data(), current.scales.size()));
        break;
      case OutputTensor::Kind::kMins: LG_RETURN_IF_ERROR(writer->append(current.mins.data(), current.mins.size())); break;
    }
  }
  return writer->finish();
}

// Every file of `src` but its weights (config, tokenizer, generation config...).
Status copy_side_files(const fs::path& src, const fs::path& dst) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(src, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || e.path().extension() == ".safetensors" || name == "model.safetensors.index.json") {
      continue;
    }
    fs::copy_file(e.path(), dst / name, ec);
    if (ec) return Status::io_error("cannot copy " + e.path().string() + ": " + ec.message());
  }
  if (ec) return Status::io_error("cannot list " + src.string() + ": " + ec.message());
  return Status::ok();
}

}  // namespace

Result<QuantizeResult> quantize_model(const std::string& src_dir, const std::string& out_dir, WeightType t) {
  if (t == WeightType::kInt8Outlier) {
    return Status::invalid_argument(
        "int8-outlier holds int8 weights: quantize with --dtype int8 and load the result as int8-outlier");
  }
  if (!is_quantized(t)) {
    return Status::invalid_argument("--dtype " + std::string(weight_type_name(t)) +
                                    " is not quantised: choose int8, int4, int4-g64, int4-asym or int4-asym-g64");
  }
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !(fs::is_directory(out_dir, ec) && fs::is_empty(out_dir, ec))) {
    return Status::already_exists(out_dir + " exists and is not an empty directory");
  }
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const ModelDir> source, ModelDir::open(src_dir));
  const WeightStore* store = &source->weights();
  LG_ASSIGN_OR_RETURN(std::optional<WeightType> already, quantized_file_type(*store));
  if (already) {
    return Status::invalid_argument(src_dir + " is quantised already (" + std::string(weight_type_name(*already)) +
                                    "); quantise the original float weights");
  }
  LG_ASSIGN_OR_RETURN(std::vector<OutputTensor> tensors, output_tensors(*store, source->config(), t));

  QuantizeResult result;
  result.source_sha256 = source->sha256();
  for (const auto& file : store->files()) result.source_bytes += file->bytes().size();
  std::map<std::string, std::string> metadata = {{"loragate.format", kQuantizedFormat},
                                                 {"loragate.dtype", std::string(weight_type_name(t))},
                                                 {"loragate.source_sha256", result.source_sha256}};
  if (is_int4(t)) metadata["loragate.group_size"] = std::to_string(int4_group(t));

  // Written beside and renamed, so that a failure leaves no half-written model.
  const fs::path partial = out_dir + ".partial";
  fs::remove_all(partial, ec);
  if (!fs::create_directories(partial, ec) || ec) {
    return Status::io_error("cannot create " + partial.string() + ": " + ec.message());
  }
  Status written = copy_side_files(src_dir, partial);
  if (written.is_ok()) written = write_weights((partial / "model.safetensors").string(), *store, tensors, t, metadata);
  if (written.is_ok()) {
    fs::remove(out_dir, ec);  // an empty directory, if any
    fs::rename(partial, out_dir, ec);
    if (ec) written = Status::io_error("cannot rename " + partial.string() + " to " + out_dir + ": " + ec.message());
  }
  if (!written.is_ok()) {
    fs::remove_all(partial, ec);
    return written;
  }
  result.weights_path = (fs::path(out_dir) / "model.safetensors").string();
  result.bytes = fs::file_size(result.weights_path, ec);
  LG_ASSIGN_OR_RETURN(result.sha256, sha256_file(result.weights_path));
  return result;
}

}  // namespace loragate

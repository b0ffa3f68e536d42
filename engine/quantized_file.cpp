#include "engine/quantized_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loragate {
namespace {

// The tensors of one quantised weight in the file.
struct QuantizedTensor {
  const TensorView* levels = nullptr;
  const TensorView* scales = nullptr;
  const TensorView* mins = nullptr;  // int4 asymmetric only
  int64_t rows = 0, cols = 0;
};

std::string tensor_place(const TensorView& t) { return "tensor '" + t.name + "' in " + t.file; }

// int8 levels are in [-127, 127]; an odd K leaves each int4 row's last high nibble 0.
Status check_levels(WeightType file, const QuantizedTensor& q) {
  const TensorView& t = *q.levels;
  if (is_int8(file)) {
    const auto* found = static_cast<const uint8_t*>(std::memchr(t.data, 0x80, t.nbytes));
    if (found == nullptr) return Status::ok();
    const int64_t at = found - t.data;
    return Status::corrupt(tensor_place(t) + ": level -128 at row " + std::to_string(at / q.cols) + ", column " +
                           std::to_string(at % q.cols) + "; int8 levels are in [-127, 127]");
  }
  if (q.cols % 2 == 0) return Status::ok();
  const int64_t row_bytes = (q.cols + 1) / 2;
  for (int64_t r = 0; r < q.rows; ++r) {
    if ((t.data[r * row_bytes + row_bytes - 1] >> 4) != 0) {
      return Status::corrupt(tensor_place(t) + ": row " + std::to_string(r) + " has a level past its " +
                             std::to_string(q.cols) + " columns");
    }
  }
  return Status::ok();
}

// Scales must be finite and >= 0 (they are max |w| / 127, or a range / 15);
// minimums finite. One bad value would poison every output of its row.
Status check_scales(const TensorView& t, bool is_minimum) {
  const std::string what = is_minimum ? "minimum" : "scale";
  const std::string rule = is_minimum ? "minimums must be finite" : "scales must be finite and >= 0";
  const size_t count = t.nbytes / dtype_size(t.dtype);
  for (size_t i = 0; i < count; ++i) {
    float v;
    if (t.dtype == DType::kF32) {
      std::memcpy(&v, t.data + i * 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + i * 2, 2);
      v = f16_to_f32(h);
    }
    if (std::isfinite(v) && (is_minimum || v >= 0)) continue;
    const int64_t per_row = t.shape.size() == 2 ? t.shape[1] : 1;
    const std::string at = per_row == 1 ? "row " + std::to_string(i)
                                        : "row " + std::to_string(static_cast<int64_t>(i) / per_row) + ", group " +
                                              std::to_string(static_cast<int64_t>(i) % per_row);
    return Status::corrupt(tensor_place(t) + ": " + what + " of " + at + " is " + std::to_string(v) + "; " + rule);
  }
  return Status::ok();
}

Result<QuantizedTensor> require_quantized(const WeightStore& store, const LinearTensor& part, WeightType file) {
  QuantizedTensor q;
  q.rows = part.rows;
  q.cols = part.cols;
  if (is_int8(file)) {
    LG_ASSIGN_OR_RETURN(q.levels, store.require(part.name, DType::kI8, {part.rows, part.cols}));
    LG_ASSIGN_OR_RETURN(q.scales, store.require(part.name + "_scale", DType::kF32, {part.rows}));
  } else {
    const int64_t group = int4_group(file), groups = (part.cols + group - 1) / group;
    LG_ASSIGN_OR_RETURN(q.levels, store.require(part.name, DType::kU8, {part.rows, (part.cols + 1) / 2}));
    LG_ASSIGN_OR_RETURN(q.scales, store.require(part.name + "_scale", DType::kF16, {part.rows, groups}));
    if (int4_asymmetric(file)) {
      LG_ASSIGN_OR_RETURN(q.mins, store.require(part.name + "_min", DType::kF16, {part.rows, groups}));
    }
  }
  LG_RETURN_IF_ERROR(check_levels(file, q));
  LG_RETURN_IF_ERROR(check_scales(*q.scales, false));
  if (q.mins != nullptr) LG_RETURN_IF_ERROR(check_scales(*q.mins, true));
  return q;
}

// The rows of several quantised tensors stacked, read from the mapped file
// as they are packed; each packed panel's level pages are released.
class StackedQuantizedRows final : public cpu::PackedMatrix::QuantizedRowSource {
 public:
  StackedQuantizedRows(const WeightStore& store, const std::vector<QuantizedTensor>& parts, WeightType file)
      : store_(store), parts_(parts), file_(file) {
    for (const QuantizedTensor& p : parts) {
      first_row_.push_back(rows_);
      rows_ += p.rows;
    }
  }
  int64_t rows() const { return rows_; }

  void read_row(int64_t row, cpu::QuantizedRow& out) const override {
    const size_t i = part_of(row);
    const QuantizedTensor& q = parts_[i];
    const int64_t r = row - first_row_[i];
    out.levels.resize(static_cast<size_t>(q.cols));
    if (is_int8(file_)) {
      std::memcpy(out.levels.data(), q.levels->data + r * q.cols, static_cast<size_t>(q.cols));
      std::memcpy(&out.scale, q.scales->data + r * 4, 4);
      return;
    }
    const uint8_t* packed = q.levels->data + r * level_row_bytes(q);
    for (int64_t k = 0; k < q.cols; ++k) {
      out.levels[static_cast<size_t>(k)] = static_cast<uint8_t>((packed[k / 2] >> ((k % 2) * 4)) & 15u);
    }
    const int64_t groups = q.scales->shape[1];
    out.group_scales.resize(static_cast<size_t>(groups));
    std::memcpy(out.group_scales.data(), q.scales->data + r * groups * 2, static_cast<size_t>(groups) * 2);
    out.group_mins.resize(q.mins != nullptr ? static_cast<size_t>(groups) : 0);
    if (q.mins != nullptr) {
      std::memcpy(out.group_mins.data(), q.mins->data + r * groups * 2, static_cast<size_t>(groups) * 2);
    }
  }

  void rows_packed(int64_t begin, int64_t end) const override {
    for (size_t i = 0; i < parts_.size(); ++i) {
      const int64_t lo = std::max(begin, first_row_[i]) - first_row_[i];
      const int64_t hi = std::min(end, first_row_[i] + parts_[i].rows) - first_row_[i];
      if (lo >= hi) continue;
      const int64_t row_bytes = level_row_bytes(parts_[i]);
      store_.release(parts_[i].levels->data + lo * row_bytes, static_cast<size_t>((hi - lo) * row_bytes));
    }
  }

  // Releases what rows_packed() could not: pages straddling two panels, and the scales.
  void release_all() const {
    for (const QuantizedTensor& q : parts_) {
      for (const TensorView* t : {q.levels, q.scales, q.mins}) {
        if (t != nullptr) store_.release(t->data, t->nbytes);
      }
    }
  }

 private:
  int64_t level_row_bytes(const QuantizedTensor& q) const { return is_int8(file_) ? q.cols : (q.cols + 1) / 2; }
  size_t part_of(int64_t row) const {
    size_t i = 0;
    while (i + 1 < parts_.size() && row >= first_row_[i + 1]) ++i;
    return i;
  }

  const WeightStore& store_;
  const std::vector<QuantizedTensor>& parts_;
  WeightType file_;
  std::vector<int64_t> first_row_;
  int64_t rows_ = 0;
};

}  // namespace

Result<std::optional<WeightType>> quantized_file_type(const WeightStore& store) {
  const std::string format = store.metadata("loragate.format");
  if (format.empty()) return std::optional<WeightType>();
  if (format != kQuantizedFormat) {
    return Status::unsupported("loragate.format '" + format + "' is not supported (this loragate reads " +
                               kQuantizedFormat + ")");
  }
  const std::string name = store.metadata("loragate.dtype");
  Result<WeightType> type = parse_weight_type(name);
  if (!type.is_ok()) return Status::corrupt("loragate.dtype: " + type.status().message());
  if (!is_quantized(*type) || *type == WeightType::kInt8Outlier) {
    return Status::corrupt("loragate.dtype '" + name + "' is not a quantised file type (int8 or an int4 type)");
  }
  const std::string group = store.metadata("loragate.group_size");
  const std::string want = is_int4(*type) ? std::to_string(int4_group(*type)) : "";
  if (group != want) {
    return Status::corrupt("loragate.group_size '" + group + "' disagrees with loragate.dtype '" + name + "'" +
                           (want.empty() ? " (int8 has no groups)" : ", whose groups are " + want + " wide"));
  }
  return std::optional<WeightType>(*type);
}

Status check_quantized_storage(WeightType file, WeightType storage, const std::string& dir) {
  if (file == storage || (is_int8(file) && is_int8(storage))) return Status::ok();
  const std::string have(weight_type_name(file));
  return Status::invalid_argument(dir + " holds weights quantised as " + have + " (loragate quantize); load it as " +
                                  have + (is_int8(file) ? " or int8-outlier" : "") + ", not " +
                                  std::string(weight_type_name(storage)) +
                                  ", or quantise the original weights to that type");
}

Result<cpu::PackedMatrix> pack_quantized_file_matrix(const WeightStore& store,
                                                     const std::vector<LinearTensor>& parts, WeightType file,
                                                     WeightType storage) {
  std::vector<QuantizedTensor> tensors;
  for (const LinearTensor& p : parts) {
    LG_ASSIGN_OR_RETURN(QuantizedTensor q, require_quantized(store, p, file));
    tensors.push_back(q);
  }
  const StackedQuantizedRows source(store, tensors, file);
  cpu::PackedMatrix packed = cpu::PackedMatrix::pack_quantized(source, source.rows(), parts.front().cols, storage);
  source.release_all();
  return packed;
}

}  // namespace loragate

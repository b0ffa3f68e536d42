#include "common/weight_type.h"

#include <initializer_list>

namespace loragate {

const std::initializer_list<WeightType>& all_weight_types() {
  static const std::initializer_list<WeightType> all = {
      WeightType::kF32,     WeightType::kBF16,    WeightType::kInt8,      WeightType::kInt8Outlier,
      WeightType::kInt4,    WeightType::kInt4G64, WeightType::kInt4Asym,  WeightType::kInt4AsymG64};
  return all;
}

std::string_view weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::kF32: return "f32";
    case WeightType::kBF16: return "bf16";
    case WeightType::kInt8: return "int8";
    case WeightType::kInt8Outlier: return "int8-outlier";
    case WeightType::kInt4: return "int4";
    case WeightType::kInt4G64: return "int4-g64";
    case WeightType::kInt4Asym: return "int4-asym";
    case WeightType::kInt4AsymG64: return "int4-asym-g64";
  }
  return "?";
}

Result<WeightType> parse_weight_type(std::string_view name) {
  std::string valid;
  for (WeightType t : all_weight_types()) {
    if (name == weight_type_name(t)) return t;
    valid += (valid.empty() ? "" : ", ") + std::string(weight_type_name(t));
  }
  return Status::invalid_argument("dtype must be one of " + valid + "; got '" + std::string(name) + "'");
}

}  // namespace loragate

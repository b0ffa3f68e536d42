// Device: where a model runs, as `model.device` and `--device` name it.
// Parsing has no dependency on any runner, so the config reader (and its
// fuzz target) can check the name without linking one.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace loragate {

// `cpu`, or `cuda` / `cuda:N` (device N, default 0).
struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;
  std::string name() const;  // "cpu" or "cuda:N"
  bool operator==(const Device&) const = default;
};
// Parses `model.device` / `--device`; anything else is refused, naming the valid forms.
Result<Device> parse_device(std::string_view text);

}  // namespace loragate

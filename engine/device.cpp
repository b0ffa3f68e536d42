#include "engine/device.h"

#include <charconv>

namespace loragate {

std::string Device::name() const { return kind == Kind::kCpu ? "cpu" : "cuda:" + std::to_string(index); }

Result<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device{};
  if (text == "cuda") return Device{Device::Kind::kCuda, 0};
  constexpr std::string_view kCudaPrefix = "cuda:";
  if (text.substr(0, kCudaPrefix.size()) == kCudaPrefix) {
    const std::string_view digits = text.substr(kCudaPrefix.size());
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index >= 0) {
      return Device{Device::Kind::kCuda, index};
    }
  }
  return Status::invalid_argument("device '" + std::string(text) + "' is not one of cpu, cuda, cuda:N");
}

}  // namespace loragate

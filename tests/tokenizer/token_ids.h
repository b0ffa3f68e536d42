// Token ids written inline in the tokenizer tests: ids({1, 2, 3}).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace loragate {

inline std::vector<int32_t> ids(std::initializer_list<int32_t> l) { return l; }

}  // namespace loragate

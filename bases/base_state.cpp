#include "bases/base_state.h"

namespace loragate {

const char* base_state_name(BaseState state) {
  switch (state) {
    case BaseState::kLoading: return "loading";
    case BaseState::kCandidate: return "candidate";
    case BaseState::kServing: return "serving";
    case BaseState::kDraining: return "draining";
    case BaseState::kPrevious: return "previous";
    case BaseState::kFailed: return "failed";
  }
  return "failed";
}

}  // namespace loragate

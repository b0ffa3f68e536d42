// BaseState: where one base generation of a BaseSet stands.
#pragma once

namespace loragate {

enum class BaseState { kLoading, kCandidate, kServing, kDraining, kPrevious, kFailed };
const char* base_state_name(BaseState state);  // "loading", "candidate", "serving", "draining", "previous", "failed"

}  // namespace loragate

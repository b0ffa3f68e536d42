#include "evaluator/eval_types.h"

namespace loragate::eval {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kFail: return "fail";
    case Verdict::kInconclusive: return "inconclusive";
    case Verdict::kSkipped: return "skipped";
  }
  return "inconclusive";
}

}  // namespace loragate::eval

// ArmEngine: where one base's evaluation requests run — an EngineLoop of its
// own (offline `loragate eval run`) or the one of a loaded ServingBase
// (evaluations inside a running server, submitted as background requests so
// they run in what live traffic leaves). The runner only submits batches of
// requests and waits for them.
//
// Not thread-safe: one runner drives an ArmEngine at a time.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bases/serving_base.h"
#include "chat/chat_template.h"
#include "common/status.h"
#include "engine/api.h"

namespace loragate::eval {

class ArmEngine {
 public:
  virtual ~ArmEngine() = default;
  // Runs every request to its end; results in request order. A request the
  // engine refuses (e.g. longer than max_model_len) comes back as a
  // FinishReason::kError result, so one bad row does not stop the others; a
  // status is returned only when the batch as a whole did not run (the
  // evaluation was cancelled).
  virtual Result<std::vector<GenerationResult>> run(std::vector<GenerationRequest> requests) = 0;
  // Registers an adapter under `name` (kept until the ArmEngine goes).
  virtual Status add_adapter(const std::string& name, const std::string& path) = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual const ChatTemplate& chat_template() const = 0;
  virtual const std::string& name() const = 0;    // the base's name in reports
  virtual const std::string& sha256() const = 0;  // of its weights
  // Of its tokenizer.json bytes ("" without one): bases whose tokenizers
  // differ are compared per byte of reference text, not per token.
  virtual const std::string& tokenizer_sha256() const = 0;
  virtual int64_t max_model_len() const = 0;  // prompt + output tokens a request may have
};

// Loads `model_dir` into an engine of its own (f32 weights, greedy-friendly defaults).
Result<std::unique_ptr<ArmEngine>> load_offline_arm(const std::string& name, const std::string& model_dir,
                                                    const EngineOptions& options);
// Runs on a loaded base's loop, beside whatever else it serves. Once `cancel`
// (may be null; must outlive the arm) turns true, the request running is
// cancelled and run() returns a cancelled status, as does every later run().
std::unique_ptr<ArmEngine> serving_base_arm(std::shared_ptr<ServingBase> base,
                                            const std::atomic<bool>* cancel = nullptr);

}  // namespace loragate::eval

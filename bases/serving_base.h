// ServingBase: one loaded base-model generation — its engine loop, chat
// template, adapter cache and identity (name + sha256 of its weight files).
//
// Held by shared_ptr: a request captures the base it was resolved against
// and finishes on it (streams included), so a base that stops serving lives
// on until its last request ends. Everything but the in-flight counter is
// immutable after load(); every method is thread-safe. The BaseSet owns the
// bases and makes sure the last reference is never dropped on the base's own
// step thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "common/weight_type.h"
#include "common/status.h"
#include "engine/api.h"

namespace loragate {

// What to load: a registry name, a Hugging Face model directory, a storage type.
struct BaseSpec {
  std::string name;
  std::string path;
  WeightType dtype = WeightType::kF32;
};

// "f32" / "bf16" (the config and registry spelling), and back.

class ServingBase {
 public:
  // Loads the engine, the chat template and hashes the weight files. The
  // loop steps under `gate` (shared with the other bases) with the given priority.
  static Result<std::shared_ptr<ServingBase>> load(const BaseSpec& spec, const EngineOptions& options,
                                                   std::shared_ptr<ComputeGate> gate, bool serving);
  ServingBase(const ServingBase&) = delete;
  ServingBase& operator=(const ServingBase&) = delete;

  const std::string& name() const { return spec_.name; }
  const std::string& path() const { return spec_.path; }
  WeightType dtype() const { return spec_.dtype; }
  const std::string& sha256() const { return sha256_; }
  // "<name>-<first 8 hex of sha256>": the OpenAI system_fingerprint of its responses.
  std::string fingerprint() const { return spec_.name + "-" + sha256_.substr(0, 8); }

  EngineLoop& loop() const { return *loop_; }
  const Tokenizer* tokenizer() const { return loop_->model().tokenizer(); }
  AdapterCatalog* adapters() const { return loop_->adapters(); }
  const ChatTemplate& chat_template() const { return loop_->model().chat_template(); }
  int64_t max_model_len() const { return loop_->max_model_len(); }
  // Weights, KV pool and LoRA slots as allocated, plus adapters held in host memory.
  int64_t memory_bytes() const;

  // Requests captured by the gateway and not yet finished.
  void begin_request() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  void end_request() { in_flight_.fetch_sub(1, std::memory_order_relaxed); }
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 private:
  ServingBase(BaseSpec spec, std::string sha256, std::unique_ptr<EngineLoop> loop)
      : spec_(std::move(spec)), sha256_(std::move(sha256)), loop_(std::move(loop)) {}

  const BaseSpec spec_;
  const std::string sha256_;
  const std::unique_ptr<EngineLoop> loop_;
  std::atomic<int64_t> in_flight_{0};
};


}  // namespace loragate

// Engine: one base model serving many requests with continuous batching.
//
// It owns the model runner (which holds the weights and the KV cache,
// engine/model_runner.h), the tokenizer, the KV blocks' BlockManager, the
// Scheduler and every live Sequence. Each step() schedules a batch, runs one
// forward pass, scores prompt tokens and samples, and retires finished
// sequences. Scoring (teacher forcing, prompt_logprobs) runs in the same
// batches as generation: a scored prompt is a prefill that keeps the logits
// rows of its scored positions. Engines are plain objects (never
// singletons): two engines with different bases can live in one process.
// Not thread-safe: one thread drives step().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/dtype.h"
#include "common/weight_type.h"
#include "common/status.h"
#include "grammar/token_mask.h"
#include "adapters/adapter_cache.h"
#include "engine/engine_types.h"
#include "engine/block_manager.h"
#include "engine/forward_batch.h"
#include "engine/llama_model.h"
#include "engine/model_runner.h"
#include "engine/request_sink.h"
#include "engine/sampling_params.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/model_dir.h"
#include "tokenizer/tokenizer.h"

namespace loragate {

class Engine {
 public:
  // Loads the weights of `model` onto options.device; with `merge`, that
  // adapter is folded into the base weights (a baseline for benchmarks).
  static Result<std::unique_ptr<Engine>> load(std::shared_ptr<const ModelDir> model, const EngineOptions& options,
                                              const LoraAdapter* merge = nullptr);
  // Opens `model_dir` (ModelDir::open), then loads it.
  static Result<std::unique_ptr<Engine>> load(const std::string& model_dir, const EngineOptions& options,
                                              const LoraAdapter* merge = nullptr);
  // An engine around a runner already loaded (load() ends here; tests pass
  // runners of their own). Checks what depends on the runner: max_model_len
  // is capped at what its KV pool holds for one sequence, and a length
  // configured explicitly that does not fit is refused.
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& options, std::shared_ptr<const ModelDir> model,
                                                std::unique_ptr<ModelRunner> runner);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  // Checks a request without queueing it: empty prompts, invalid parameters
  // (prompt_logprobs and score_from too), token ids outside the vocabulary,
  // and requests longer than max_model_len
  // or than the whole KV pool are refused, saying why. Thread-safe.
  Status validate_request(const GenerationRequest& request) const;
  // Validates and queues a request; returns its id (`id` when > 0, which the
  // caller keeps unique, else the next free one).
  Result<int64_t> add_request(GenerationRequest request, int64_t id = 0);
  // Ends a request now: its KV blocks are freed and its sink (or
  // take_finished) gets a result with FinishReason::kCancelled.
  // Returns false when the id is not live.
  bool cancel(int64_t id);
  // Cancels every live request.
  void cancel_all();
  // Ends every live request now with FinishReason::kError and `error` (its
  // code becomes the result's error_code): its KV blocks are freed and its
  // sink (or take_finished) hears of it.
  void fail_all(const Status& error);
  // Runs one scheduling step and forward pass. A step may do nothing while
  // every queued request waits for its adapter to load (see made_progress()).
  // When the forward pass fails, the engine turns unhealthy (health()), then
  // every live request ends with an internal error carrying the runner's
  // status, and that status is returned: no request is left queued behind a
  // step that failed.
  Status step();
  // ok, or the first failed step's error (internal): the engine is unhealthy
  // for good (device errors are often sticky; the replica wants a restart).
  // Thread-safe; set before the failed step's requests hear of it.
  Status health() const;
  bool made_progress() const { return last_step_progress_; }
  // Frees the slots and memory of removed adapters no request holds (step() does it too).
  void collect_removed_adapters() {
    if (adapters_) adapters_->collect_removed();
  }
  bool has_unfinished() const { return scheduler_->has_work(); }
  // Live requests queued or running (background ones, RequestPriority::kBackground, do not count).
  bool has_live_work() const { return scheduler_->has_live_work(); }
  // Results of the requests finished since the last call, in finishing order.
  std::vector<GenerationResult> take_finished();
  // Submits all requests, steps until they finish, returns results in request
  // order. It returns only when every request it submitted has ended: after a
  // failed step (see step()) or 120 s without progress it returns the error,
  // its requests ended with it.
  Result<std::vector<GenerationResult>> generate(std::vector<GenerationRequest> requests);

  const ModelConfig& config() const { return runner_->config(); }
  const ModelRunner& runner() const { return *runner_; }
  const Tokenizer* tokenizer() const { return model_->tokenizer(); }  // nullptr when the model has none
  // The directory it was loaded from: config, tokenizer, chat template, identity.
  const ModelDir& model() const { return *model_; }
  // This engine's adapters (register with adapters()->add); null when max_loras is 0.
  AdapterCache* adapters() const { return adapters_.get(); }
  const EngineOptions& options() const { return options_; }
  int64_t max_model_len() const { return max_model_len_; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  EngineStats stats() const;
  // Forgets every cached prefix: blocks free for reuse return to the pool,
  // blocks of running requests stay theirs but are no longer found.
  void reset_prefix_cache();
  int64_t kv_cache_bytes() const { return runner_->kv_geometry().bytes(); }

 private:
  Engine(EngineOptions options, std::shared_ptr<const ModelDir> model, std::unique_ptr<ModelRunner> runner,
         int64_t max_model_len);
  GenerationResult make_result(const Sequence& seq) const;
  // Hands a finished sequence's result to its sink or the finished list, and forgets it.
  void retire(Sequence& seq);
  // Offers the blocks `seq` filled with computed K/V to the prefix cache.
  void register_computed_blocks(Sequence& seq);
  // Ends a live sequence with `error` and retires it.
  void fail(Sequence& seq, const Status& error);

  EngineOptions options_;
  std::shared_ptr<const ModelDir> model_;
  std::unique_ptr<ModelRunner> runner_;
  BlockManager blocks_;
  std::unique_ptr<AdapterCache> adapters_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<int32_t> eos_ids_;
  // The tokenizer's tokens as bytes for grammar masks, built at the first constrained request.
  std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary();
  std::shared_ptr<const grammar::TokenVocabulary> grammar_vocab_;
  // The automaton every live request of one compiled grammar shares (their
  // transitions and token masks), by grammar; an entry lives while a request uses it.
  std::shared_ptr<grammar::Automaton> grammar_automaton(const std::shared_ptr<const grammar::Grammar>& g);
  std::unordered_map<const grammar::Grammar*, std::weak_ptr<grammar::Automaton>> automata_;
  int64_t max_model_len_ = 0;
  int64_t next_id_ = 1;
  uint64_t seed_counter_;
  std::map<int64_t, std::unique_ptr<Sequence>> sequences_;
  std::vector<GenerationResult> finished_;
  ForwardBatch batch_;
  std::vector<float> logits_;  // grows to the largest step's rows and is reused
  EngineStats counters_;
  bool last_step_progress_ = false;
  mutable std::mutex health_mu_;
  Status health_;  // guarded by health_mu_
};

}  // namespace loragate

// The types every side of the engine speaks: a request, its result, the
// engine's options and stats. Rooms above the engine include engine/api.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "adapters/adapter_catalog.h"
#include "common/status.h"
#include "common/weight_type.h"
#include "engine/device.h"
#include "engine/request_sink.h"
#include "engine/sampling_params.h"
#include "model/model_dir.h"

namespace loragate {

class ModelRunner;
struct RunnerOptions;

enum class FinishReason { kNone, kLength, kStop, kCancelled, kError };
const char* finish_reason_name(FinishReason r);  // "length", "stop", "cancelled", "error"

struct EngineOptions {
  Device device;                               // where the forward passes run (model.device, --device)
  WeightType weight_dtype = WeightType::kF32;  // storage of the weights (common/weight_type.h)
  float outlier_threshold = kDefaultOutlierThreshold;  // int8-outlier: |x| above runs in f32
  int32_t kv_block_size = 16;                // tokens per KV block
  int32_t kv_num_blocks = 0;                 // KV pool size in blocks; 0 = from kv_cache_bytes
  int64_t kv_cache_bytes = 256ll << 20;      // KV pool budget when kv_num_blocks is 0
  int64_t max_num_batched_tokens = 512;      // tokens per step
  int32_t max_num_seqs = 64;                 // sequences running at once
  int64_t max_model_len = 0;                 // prompt + output tokens; 0 = max_position_embeddings, capped at
                                             // what the KV pool holds (a larger value set here: load fails)
  int32_t max_loras = kDefaultMaxLoras;      // adapter slots usable in one step; 0 = no adapters
  int32_t max_lora_rank = kDefaultMaxLoraRank;             // largest adapter rank accepted (slot size)
  int64_t adapter_host_bytes = kDefaultAdapterHostBytes;   // loaded adapters kept in host memory
  int64_t max_logits_rows = 256;  // scored prompt rows computed per step at most (bounds the logits buffer);
                                  // decode rows are not counted
  // Tokens of background requests (RequestPriority::kBackground) per step at
  // most, within what live requests left: a live request arriving mid-step
  // waits for the step, so background work keeps steps short. A step costs
  // about a token's compute per token (stories260K on a CPU: ~12 us each, a
  // 128-token evaluation chunk ~6 ms against a 16-token live prefill's
  // 0.16 ms), so 16 keeps a background step as short as a typical live one.
  int64_t max_background_tokens = 16;
  // Reuse the KV blocks of a prompt prefix computed before (engine/prefix_cache.h):
  // full blocks keyed by base, dtype, adapter content, cache_salt and tokens.
  bool prefix_caching = true;
  // Where load() gets its model runner (not a YAML key: for embedders and
  // tests that run a runner of their own); null = load_model_runner.
  std::function<Result<std::unique_ptr<ModelRunner>>(const ModelDir& model, const RunnerOptions& options)>
      runner_factory;
};

// The scheduling class of a request. Background requests (in-server
// evaluations) run only in what live traffic leaves of a step: live decodes
// and prefills are planned first, background chunks fill the rest.
enum class RequestPriority { kLive, kBackground };

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  std::string adapter;          // a registered adapter's name; "" = the base alone
  RequestSink* sink = nullptr;  // receives tokens and the result; null = collect with take_finished()
  // >= 0: return the log-probability of every prompt token from score_from
  // on, each with this many most likely alternatives (0..20); -1 = none.
  // With params.max_tokens 0 the request is a pure score: no token is generated.
  int32_t prompt_logprobs = -1;
  // Index of the first prompt token scored; token i is scored with the
  // logits at position i - 1, so 1 <= score_from < prompt size.
  int64_t score_from = 1;
  RequestPriority priority = RequestPriority::kLive;
  // The tenant's salt of the prefix cache (OpenAI's cache_salt): requests
  // share cached blocks only when their salts are equal. "" = no salt.
  std::string cache_salt;
};

struct GenerationResult {
  int64_t id = 0;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::string text;                  // detokenised output (stop string cut), "" without tokenizer
  FinishReason finish_reason = FinishReason::kNone;
  std::string adapter;
  std::string error;                 // why, with FinishReason::kError
  StatusCode error_code = StatusCode::kOk;  // its kind, when known (e.g. kNotFound: the adapter went)
  double queue_ms = 0;               // arrival -> first scheduled
  double ttft_ms = 0;                // arrival -> first token
  std::vector<double> itl_ms;        // gaps between consecutive tokens
  std::vector<TokenLogprobs> logprobs;  // per output token, when params.logprobs >= 0
  // Entry k is prompt token score_from + k, when prompt_logprobs >= 0 (log_softmax
  // of the raw logits, before temperature, top-k and top-p, as for logprobs).
  std::vector<TokenLogprobs> prompt_logprobs;
  int32_t preemptions = 0;
  // Prompt tokens whose KV came from the prefix cache when the request was
  // first scheduled (usage.prompt_tokens_details.cached_tokens).
  int64_t cached_tokens = 0;
};

struct EngineStats {
  size_t waiting = 0, running = 0;
  int32_t kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t prompt_tokens = 0, generated_tokens = 0;
  // Prefix cache, in tokens: looked up (a request's tokens, at each admission) and found cached.
  int64_t prefix_cache_queries = 0, prefix_cache_hits = 0;
  int32_t prefix_cache_blocks = 0;  // blocks holding a cached prefix (in use or free for reuse)
};

}  // namespace loragate

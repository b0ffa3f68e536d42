#include "engine/engine.h"

#include <cstdio>
#include <limits>
#include <random>
#include <thread>

#include "kernels/cpu/isa.h"

namespace loragate {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The longest sequence (prompt + output) the KV pool holds on its own, as
// validate_request counts blocks; INT64_MAX when a sliding window bounds what
// a sequence keeps and that bound fits.
int64_t kv_room_tokens(const ModelConfig& model, const KvGeometry& kv, int64_t max_num_batched_tokens) {
  const int64_t block = kv.block_size, blocks = kv.num_blocks;
  const int64_t window = model.sliding_window;
  if (window <= 0) return blocks * block;
  const int64_t held = window - 1 + max_num_batched_tokens;  // the most a windowed sequence keeps
  if ((held + block - 1) / block + 1 <= blocks) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(0, (blocks - 1) * block);
}

// max_model_len as served: the configured length (or max_position_embeddings),
// never past what the KV pool holds for one sequence nor past int32 positions.
// A length configured explicitly that the pool cannot hold is refused (as
// vLLM does); the default is capped, and the log says so.
Result<int64_t> resolve_max_model_len(const EngineOptions& options, const ModelConfig& model, const KvGeometry& kv) {
  int64_t len = options.max_model_len > 0 ? std::min(options.max_model_len, model.max_position_embeddings)
                                          : model.max_position_embeddings;
  len = std::min<int64_t>(len, std::numeric_limits<int32_t>::max());  // positions are int32
  const int64_t room = kv_room_tokens(model, kv, options.max_num_batched_tokens);
  if (len <= room) return len;
  if (options.max_model_len > 0) {
    return Status::invalid_argument(
        "max_model_len " + std::to_string(len) + " does not fit the KV pool, which holds " + std::to_string(room) +
        " tokens for one sequence (" + std::to_string(kv.num_blocks) + " blocks of " + std::to_string(kv.block_size) +
        "); raise the KV cache budget (engine.kv_cache_mib) or lower engine.max_model_len");
  }
  std::fprintf(stderr,
               "loragate: max_model_len capped at %lld tokens (the KV pool: %d blocks of %d), below the model's "
               "max_position_embeddings %lld; raise engine.kv_cache_mib for longer sequences\n",
               static_cast<long long>(room), kv.num_blocks, kv.block_size,
               static_cast<long long>(model.max_position_embeddings));
  return room;
}

}  // namespace

Engine::Engine(EngineOptions options, std::shared_ptr<const ModelDir> model, std::unique_ptr<ModelRunner> runner,
               int64_t max_model_len)
    : options_(options),
      model_(std::move(model)),
      runner_(std::move(runner)),
      blocks_(runner_->kv_geometry().num_blocks, runner_->kv_geometry().block_size, options.prefix_caching),
      adapters_(options.max_loras > 0
                    ? std::make_unique<AdapterCache>(
                          runner_->config(),
                          AdapterCacheOptions{options.max_loras, options.max_lora_rank, options.adapter_host_bytes},
                          runner_->make_lora_slots(options.max_loras, options.max_lora_rank))
                    : nullptr),
      scheduler_(std::make_unique<Scheduler>(
          SchedulerOptions{options.max_num_batched_tokens, options.max_num_seqs, options.max_logits_rows,
                           options.max_background_tokens},
          &blocks_, adapters_.get(),
          options.prefix_caching ? prefix_engine_key(model_->sha256(), weight_type_name(options.weight_dtype),
                                                     runner_->config().to_json(), runner_->kv_geometry().block_size)
                                 : std::string())),
      seed_counter_(std::random_device{}()) {
  const ModelConfig& c = runner_->config();
  eos_ids_ = c.eos_token_ids;
  if (eos_ids_.empty() && tokenizer() && tokenizer()->eos_id()) eos_ids_.push_back(*tokenizer()->eos_id());
  max_model_len_ = max_model_len;
}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::load(const std::string& model_dir, const EngineOptions& options,
                                             const LoraAdapter* merge) {
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const ModelDir> model, ModelDir::open(model_dir));
  return load(std::move(model), options, merge);
}

Result<std::unique_ptr<Engine>> Engine::load(std::shared_ptr<const ModelDir> model, const EngineOptions& options,
                                             const LoraAdapter* merge) {
  if (options.max_num_batched_tokens <= 0) return Status::invalid_argument("max_num_batched_tokens must be > 0");
  if (options.max_num_seqs <= 0) return Status::invalid_argument("max_num_seqs must be > 0");
  if (options.max_logits_rows <= 0) return Status::invalid_argument("max_logits_rows must be > 0");
  if (options.max_background_tokens <= 0) return Status::invalid_argument("max_background_tokens must be > 0");
  if (options.max_loras < 0) return Status::invalid_argument("max_loras must be >= 0");
  if (options.max_loras > 0 && options.max_lora_rank <= 0) return Status::invalid_argument("max_lora_rank must be > 0");
  LG_RETURN_IF_ERROR(cpu::isa_from_env().status());  // a mistyped LORAGATE_ISA is an error, not a silent fallback
  const RunnerOptions runner_options{options.device,        options.weight_dtype,  options.outlier_threshold,
                                     options.kv_block_size, options.kv_num_blocks, options.kv_cache_bytes,
                                     merge};
  LG_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner,
                      options.runner_factory ? options.runner_factory(*model, runner_options)
                                             : load_model_runner(*model, runner_options));
  return create(options, std::move(model), std::move(runner));
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& options, std::shared_ptr<const ModelDir> model,
                                               std::unique_ptr<ModelRunner> runner) {
  if (model == nullptr || runner == nullptr) return Status::invalid_argument("Engine::create needs a model and a runner");
  LG_ASSIGN_OR_RETURN(const int64_t max_model_len,
                      resolve_max_model_len(options, runner->config(), runner->kv_geometry()));
  return std::unique_ptr<Engine>(new Engine(options, std::move(model), std::move(runner), max_model_len));
}

std::shared_ptr<grammar::Automaton> Engine::grammar_automaton(const std::shared_ptr<const grammar::Grammar>& g) {
  if (auto shared = automata_[g.get()].lock()) return shared;
  // Forget the grammars no request uses any more (the gateway's cache hands
  // out the same Grammar for the same schema, so the map stays small).
  std::erase_if(automata_, [](const auto& entry) { return entry.second.expired(); });
  auto made = std::make_shared<grammar::Automaton>(g);
  automata_[g.get()] = made;
  return made;
}

std::shared_ptr<const grammar::TokenVocabulary> Engine::grammar_vocabulary() {
  if (!grammar_vocab_) grammar_vocab_ = grammar::TokenVocabulary::from_tokenizer(*tokenizer());
  return grammar_vocab_;
}

Status Engine::validate_request(const GenerationRequest& request) const {
  LG_RETURN_IF_ERROR(request.params.validate());
  if (request.prompt_ids.empty()) return Status::invalid_argument("the prompt is empty");
  if (request.prompt_logprobs < -1 || request.prompt_logprobs > 20) {
    return Status::invalid_argument("prompt_logprobs must be -1 (none) or between 0 and 20, got " +
                                    std::to_string(request.prompt_logprobs));
  }
  const int64_t prompt_size = static_cast<int64_t>(request.prompt_ids.size());
  if (request.prompt_logprobs >= 0 && prompt_size == 1) {
    return Status::invalid_argument("prompt_logprobs needs a prompt of 2 tokens or more: a one-token prompt has "
                                    "nothing to score (token i is scored with the logits at position i - 1)");
  }
  if (request.prompt_logprobs >= 0 && (request.score_from < 1 || request.score_from >= prompt_size)) {
    return Status::invalid_argument("score_from must be in [1, " + std::to_string(prompt_size) + ") for a prompt of " +
                                    std::to_string(prompt_size) + " tokens, got " +
                                    std::to_string(request.score_from));
  }
  if (!request.adapter.empty() && (adapters_ == nullptr || !adapters_->contains(request.adapter))) {
    return Status::not_found("adapter '" + request.adapter + "' is not registered");
  }
  const int64_t vocab = config().vocab_size;
  for (int32_t t : request.prompt_ids) {
    if (t < 0 || t >= vocab) {
      return Status::invalid_argument("prompt token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                      std::to_string(vocab) + ")");
    }
  }
  if (request.params.grammar && tokenizer() == nullptr) {
    return Status::failed_precondition("structured output needs the model's tokenizer, and this model has none");
  }
  for (const auto& [t, bias] : request.params.logit_bias) {
    if (t < 0 || t >= vocab) {
      return Status::invalid_argument("logit_bias token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                      std::to_string(vocab) + ")");
    }
  }
  const int64_t total = static_cast<int64_t>(request.prompt_ids.size()) + request.params.max_tokens;
  if (total > max_model_len_) {
    return Status::invalid_argument("prompt (" + std::to_string(request.prompt_ids.size()) + " tokens) + max_tokens (" +
                                    std::to_string(request.params.max_tokens) + ") exceeds the model length of " +
                                    std::to_string(max_model_len_));
  }
  // With a sliding window only the last window's blocks (plus a chunk) are ever held.
  const int64_t window = config().sliding_window;
  const int64_t live = window > 0 ? std::min(total, window - 1 + options_.max_num_batched_tokens) : total;
  const KvGeometry kv = runner_->kv_geometry();
  const int64_t blocks_needed = (live + kv.block_size - 1) / kv.block_size + (window > 0 ? 1 : 0);
  if (blocks_needed > kv.num_blocks) {
    return Status::resource_exhausted("request needs " + std::to_string(blocks_needed) +
                                      " KV blocks but the pool has " + std::to_string(kv.num_blocks));
  }
  return Status::ok();
}

Result<int64_t> Engine::add_request(GenerationRequest request, int64_t id) {
  LG_RETURN_IF_ERROR(validate_request(request));
  if (id <= 0) id = next_id_;
  if (sequences_.count(id) != 0) return Status::invalid_argument("request id " + std::to_string(id) + " is in use");
  if (!request.adapter.empty()) LG_RETURN_IF_ERROR(adapters_->hold(request.adapter));
  next_id_ = std::max(next_id_, id + 1);
  const uint64_t seed = request.params.seed ? *request.params.seed : seed_counter_++;
  auto seq = std::make_unique<Sequence>(id, std::move(request.prompt_ids), std::move(request.params),
                                        request.prompt_logprobs, request.score_from, seed, tokenizer(),
                                        Clock::now());
  seq->sink = request.sink;
  seq->adapter = std::move(request.adapter);
  seq->priority = request.priority;
  seq->cache_salt = std::move(request.cache_salt);
  if (seq->params().grammar) seq->constrain(grammar_vocabulary(), grammar_automaton(seq->params().grammar));
  counters_.prompt_tokens += static_cast<int64_t>(seq->prompt_ids().size());
  Sequence* raw = seq.get();
  sequences_.emplace(id, std::move(seq));
  if (raw->finished()) {  // max_tokens == 0 and nothing to score
    retire(*raw);
    return id;
  }
  scheduler_->add(raw);
  return id;
}

bool Engine::cancel(int64_t id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return false;
  Sequence& seq = *it->second;
  scheduler_->remove(&seq);
  seq.finish(FinishReason::kCancelled);
  retire(seq);
  return true;
}

void Engine::cancel_all() {
  std::vector<int64_t> ids;
  for (const auto& [id, seq] : sequences_) ids.push_back(id);
  for (int64_t id : ids) cancel(id);
}

void Engine::fail_all(const Status& error) {
  std::vector<int64_t> ids;
  for (const auto& [id, seq] : sequences_) ids.push_back(id);
  for (int64_t id : ids) fail(*sequences_.at(id), error);
}

void Engine::fail(Sequence& seq, const Status& error) {
  scheduler_->remove(&seq);
  seq.fail(error);
  retire(seq);
}

void Engine::retire(Sequence& seq) {
  if (!seq.adapter.empty()) adapters_->unhold(seq.adapter);
  GenerationResult result = make_result(seq);
  if (seq.sink != nullptr) {
    seq.sink->on_finish(result);
  } else {
    finished_.push_back(std::move(result));
  }
  sequences_.erase(seq.id());
}

Status Engine::step() {
  last_step_progress_ = false;
  if (adapters_) adapters_->collect_removed();
  std::vector<ScheduledChunk> chunks = scheduler_->schedule();
  for (Sequence* failed : scheduler_->take_failed()) {
    retire(*failed);
    last_step_progress_ = true;
  }
  if (chunks.empty()) return Status::ok();
  last_step_progress_ = true;
  // Group sequences by adapter slot so each adapter's tokens form one segment.
  std::stable_sort(chunks.begin(), chunks.end(),
                   [](const ScheduledChunk& a, const ScheduledChunk& b) { return a.seq->lora_slot < b.seq->lora_slot; });
  const Clock::time_point start = Clock::now();
  batch_.clear();
  for (const ScheduledChunk& c : chunks) {
    Sequence& seq = *c.seq;
    if (!seq.first_scheduled) seq.first_scheduled = start;
    ForwardSeq fs;
    fs.token_begin = batch_.num_tokens();
    fs.num_tokens = c.num_tokens;
    fs.start_pos = seq.num_computed();
    fs.block_table = seq.blocks().data();
    const PositionRange wanted = seq.logits_positions(c.num_tokens);
    fs.logits_begin = wanted.begin - fs.start_pos;
    fs.num_logits = wanted.count;
    fs.lora_slot = seq.lora_slot;
    for (int64_t i = 0; i < c.num_tokens; ++i) {
      batch_.tokens.push_back(seq.token_at(fs.start_pos + i));
      batch_.positions.push_back(static_cast<int32_t>(fs.start_pos + i));
    }
    batch_.seqs.push_back(fs);
  }
  const int64_t vocab = config().vocab_size;
  const size_t logits_size = static_cast<size_t>(batch_.num_logit_rows() * vocab);
  if (logits_.size() < logits_size) logits_.resize(logits_size);
  if (Status s = runner_->forward(batch_, adapters_ ? &adapters_->slots() : nullptr, logits_.data()); !s.is_ok()) {
    // What the runner left in the KV blocks is unknown, and a device error may
    // be sticky: end every request with the step's error rather than retry.
    const Status failed = Status::internal("the engine step failed: " + s.to_string());
    {
      std::lock_guard<std::mutex> lock(health_mu_);
      if (health_.is_ok()) health_ = failed;
    }
    fail_all(failed);
    return s;
  }

  const Clock::time_point now = Clock::now();
  const int64_t window = config().sliding_window;
  int64_t row = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    Sequence& seq = *chunks[i].seq;
    const ForwardSeq& fs = batch_.seqs[i];
    seq.advance_computed(chunks[i].num_tokens);
    const int64_t prompt_size = static_cast<int64_t>(seq.prompt_ids().size());
    for (int64_t r = 0; r < fs.num_logits; ++r, ++row) {
      const float* row_logits = logits_.data() + row * vocab;
      // The logits before a prompt token score it; those of the last position sample the next token.
      if (fs.start_pos + fs.logits_begin + r + 1 < prompt_size) {
        seq.score_next_prompt_token(row_logits, vocab);
        continue;
      }
      // A grammar, penalties, bias and min_tokens change what is drawn, not the reported logprobs (the model's own).
      const float* to_sample = seq.logits_to_sample(row_logits, vocab, eos_ids_);
      if (to_sample == nullptr) {
        seq.fail(Status::invalid_argument("the request's grammar allows no token of this model's vocabulary after " +
                                          std::to_string(seq.output_ids().size()) +
                                          " generated tokens (or is too ambiguous to follow)"));
        continue;  // the sampling row is the sequence's last
      }
      const int32_t token = seq.sampler().sample(to_sample, vocab);
      if (seq.params().logprobs >= 0) {
        seq.logprobs.push_back(compute_logprobs(row_logits, vocab, token, seq.params().logprobs));
      }
      const std::string delta = seq.append_token(token, eos_ids_, now);
      if (seq.sink != nullptr) seq.sink->on_token(seq.id(), token, delta);
      ++counters_.generated_tokens;
    }
    if (blocks_.prefix_caching()) register_computed_blocks(seq);
    if (window > 0) blocks_.release_before(seq.blocks(), seq.num_computed() - window + 1);
  }
  scheduler_->release_finished();
  for (const ScheduledChunk& c : chunks) {
    if (c.seq->finished()) retire(*c.seq);
  }
  ++counters_.steps;
  return Status::ok();
}

Status Engine::health() const {
  std::lock_guard<std::mutex> lock(health_mu_);
  return health_;
}

GenerationResult Engine::make_result(const Sequence& seq) const {
  GenerationResult r;
  r.id = seq.id();
  r.prompt_ids = seq.prompt_ids();
  r.output_ids = seq.output_ids();
  r.text = seq.text();
  r.finish_reason = seq.finish_reason();
  r.adapter = seq.adapter;
  if (!seq.error().is_ok()) {
    r.error = seq.error().message();
    r.error_code = seq.error().code();
  }
  r.preemptions = seq.preemptions;
  r.cached_tokens = std::max<int64_t>(0, seq.cached_tokens);
  r.logprobs = seq.logprobs;
  r.prompt_logprobs = seq.prompt_logprobs();
  if (seq.first_scheduled) r.queue_ms = ms_between(seq.arrival(), *seq.first_scheduled);
  const auto& times = seq.token_times();
  if (!times.empty()) r.ttft_ms = ms_between(seq.arrival(), times.front());
  for (size_t i = 1; i < times.size(); ++i) r.itl_ms.push_back(ms_between(times[i - 1], times[i]));
  return r;
}

std::vector<GenerationResult> Engine::take_finished() { return std::exchange(finished_, {}); }

Result<std::vector<GenerationResult>> Engine::generate(std::vector<GenerationRequest> requests) {
  std::map<int64_t, size_t> order;
  for (size_t i = 0; i < requests.size(); ++i) {
    Result<int64_t> id = add_request(std::move(requests[i]));
    if (!id.is_ok()) {  // all or nothing: the requests already added must not run on behind the caller
      for (const auto& [added, index] : order) cancel(added);
      (void)take_finished();
      return id.status().with_context("request " + std::to_string(i));
    }
    order[*id] = i;
  }
  std::vector<GenerationResult> results(requests.size());
  auto collect = [&] {
    for (GenerationResult& r : take_finished()) {
      auto it = order.find(r.id);
      if (it != order.end()) results[it->second] = std::move(r);
    }
  };
  collect();
  auto last_progress = Clock::now();
  while (has_unfinished()) {
    if (Status s = step(); !s.is_ok()) {
      (void)take_finished();  // step() ended every live request with the error
      return s;
    }
    collect();
    if (made_progress()) {
      last_progress = Clock::now();
    } else if (Clock::now() - last_progress > std::chrono::seconds(120)) {
      const Status stalled = Status::internal("no progress for 120 s: queued requests wait on adapters that never load");
      for (const auto& [id, index] : order) {  // none of them may run on behind the caller
        if (auto it = sequences_.find(id); it != sequences_.end()) fail(*it->second, stalled);
      }
      (void)take_finished();
      return stalled;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // adapters are loading
    }
  }
  return results;
}

void Engine::register_computed_blocks(Sequence& seq) {
  const int32_t block = blocks_.block_size();
  const int64_t full = seq.num_computed() / block;
  if (full <= seq.registered_blocks) return;
  const std::vector<BlockHash>& chain = seq.chain(full, block);
  for (int64_t i = seq.registered_blocks; i < full; ++i) {
    if (seq.blocks()[i] != kNoBlock) blocks_.register_full(seq.blocks()[i], chain[i]);
  }
  seq.registered_blocks = full;
}

void Engine::reset_prefix_cache() { blocks_.reset_cache(); }

EngineStats Engine::stats() const {
  EngineStats s = counters_;
  s.waiting = scheduler_->num_waiting();
  s.running = scheduler_->num_running();
  s.kv_blocks_used = blocks_.num_used();
  s.kv_blocks_total = blocks_.num_blocks();
  s.preemptions = scheduler_->num_preemptions();
  s.prefix_cache_queries = scheduler_->prefix_cache_queries();
  s.prefix_cache_hits = scheduler_->prefix_cache_hits();
  s.prefix_cache_blocks = blocks_.num_cached();
  return s;
}

}  // namespace loragate

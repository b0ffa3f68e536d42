// Scheduler: decides, every step, which sequences run and how many tokens each.
//
// Continuous batching within a token budget, in two priority classes
// (RequestPriority): every step plans live work first — running decodes,
// then running prefills (chunked), then waiting sequences in arrival order —
// and then background work (in-server evaluations) the same way, in what
// live work left of the step and at most max_background_tokens of it, so a
// background prefill never makes a step much longer than live traffic's own
// (a live request arriving mid-step waits for the step to end).
//
// Every plan is bounded by max_num_seqs, by free KV blocks, by
// max_logits_rows (a scored prompt's chunk is cut where its scored positions
// would exceed the rows left in the step, so a long score never needs a huge
// logits buffer; a sequence with none left waits for the next step) and by
// adapter slots: a running sequence pins its adapter's slot, so at most
// max_loras adapters run in one step. A waiting sequence whose adapter is
// still loading or has no free slot stays queued while later ones of its
// class go on; once it has waited kMaxSlotWaits steps for a slot, nothing of
// its class is admitted past it until a slot frees (no starvation).
//
// Background work never holds what live work needs: when a running live
// sequence needs a block and none is free, or a waiting live sequence finds
// no block, seat or adapter slot, the most recently arrived running
// background sequence is preempted first, and a live one (the most recent)
// only when no background one is left. A background sequence preempts only
// background ones, and no background sequence is admitted while a live one
// waits for a block, a seat or a slot. A preempted sequence's blocks are
// freed and it returns to the head of its class's queue to be recomputed
// later. With no live work, background work gets the whole step but the
// max_background_tokens cap (no starvation when idle). Policy only: blocks
// come from the BlockManager.
//
// Prefix cache: a sequence being admitted first takes the longest run of
// cached blocks of its tokens (BlockManager::match, keyed by the engine,
// its adapter's content and its cache_salt) and computes only the rest;
// the blocks it shares count as held, the idle cached ones it takes count
// against the free blocks like new ones. A sequence that is not admitted
// after all lets them go at once.
// Not thread-safe: owned and called by the step loop.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "adapters/adapter_cache.h"
#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace loragate {

struct SchedulerOptions {
  int64_t max_num_batched_tokens = 512;  // tokens per step, all sequences together
  int32_t max_num_seqs = 64;             // sequences running at once
  int64_t max_logits_rows = 256;         // scored prompt positions per step, all sequences together
  int64_t max_background_tokens = 16;    // background tokens per step at most, within what live work left
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;  // tokens to compute this step, from seq->num_computed()
};

class Scheduler {
 public:
  static constexpr int32_t kMaxSlotWaits = 8;

  // `adapters` may be null when the engine serves the base alone.
  // `prefix_key` is the engine's part of every chain root (prefix_engine_key),
  // used when `blocks` caches prefixes.
  Scheduler(SchedulerOptions options, BlockManager* blocks, AdapterCache* adapters, std::string prefix_key = "");

  void add(Sequence* seq);  // joins its class's queue
  // Removes `seq` wherever it is and frees its blocks.
  void remove(Sequence* seq);
  // Plans one step; KV blocks for every chunk are allocated on return.
  std::vector<ScheduledChunk> schedule();
  // Drops finished sequences from the running set and frees their blocks and slots.
  void release_finished();
  // Sequences that failed while queued (their adapter did not load), to retire.
  std::vector<Sequence*> take_failed();

  bool has_work() const { return num_waiting() != 0 || !running_.empty(); }
  // Live sequences waiting or running (background ones do not count).
  bool has_live_work() const;
  size_t num_waiting() const { return queue(RequestPriority::kLive).size() + queue(RequestPriority::kBackground).size(); }
  size_t num_running() const { return running_.size(); }
  int64_t num_preemptions() const { return preemptions_; }
  // Tokens looked up in the prefix cache at admissions, and found there.
  int64_t prefix_cache_queries() const { return prefix_queries_; }
  int64_t prefix_cache_hits() const { return prefix_hits_; }

 private:
  // What a step has left to hand out.
  struct StepBudget {
    int64_t tokens;
    int64_t scored_rows;
  };
  // One step being planned.
  struct Plan {
    std::vector<ScheduledChunk> chunks;
    bool preempted_live = false;        // a live sequence lost its blocks this step
    bool preempted_background = false;  // a background one did
  };

  std::deque<Sequence*>& queue(RequestPriority p) { return waiting_[p == RequestPriority::kLive ? 0 : 1]; }
  const std::deque<Sequence*>& queue(RequestPriority p) const { return waiting_[p == RequestPriority::kLive ? 0 : 1]; }
  // Tokens of `seq` to compute this step: all its uncomputed ones, cut to the
  // tokens and scored rows left; 0 when it has a scored row next and none are left.
  static int64_t chunk_for(const Sequence* seq, const StepBudget& budget);
  // Takes a planned chunk's tokens and scored rows from the budget.
  static void spend(const Sequence* seq, int64_t chunk, StepBudget& budget);
  bool is_running(const Sequence* seq) const;
  // The most recent arrival among the running sequences of class `p`; null when none.
  Sequence* newest_running(RequestPriority p) const;
  // Whom a sequence of class `p` that needs room preempts: background first; a
  // background sequence never preempts a live one. Null when nobody is left.
  Sequence* victim_for(RequestPriority p) const;
  void preempt(Sequence* victim, Plan& plan, StepBudget& budget);
  // Preempts the background sequences on one adapter slot no live sequence
  // pins, so a waiting live sequence can have it; false when there is none.
  bool free_slot_held_by_background(Plan& plan, StepBudget& budget);
  void release_slot(Sequence* seq);
  // Starts a waiting sequence from the longest cached prefix of its tokens,
  // holding those blocks; returns how many it shares (0 with caching off).
  int32_t attach_cached_prefix(Sequence* seq);
  // Undoes attach_cached_prefix for a sequence that stays waiting.
  void detach_cached_prefix(Sequence* seq);
  // Plans the running sequences of class `p`: decodes first so a long prompt never stalls them.
  void plan_running(RequestPriority p, Plan& plan, StepBudget& budget);
  // Admits waiting sequences of class `p`. Returns true when one is left
  // waiting for a KV block, a seat or an adapter slot.
  bool admit_waiting(RequestPriority p, Plan& plan, StepBudget& budget);

  SchedulerOptions options_;
  BlockManager* blocks_;
  AdapterCache* adapters_;
  std::vector<Sequence*> failed_;
  std::deque<Sequence*> waiting_[2];  // live, background; arrival order, preempted ones back at the front
  std::vector<Sequence*> running_;    // arrival order, both classes
  int64_t preemptions_ = 0;
  std::string prefix_key_;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace loragate

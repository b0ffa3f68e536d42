// Scheduler: decides, every step, which sequences run and how many tokens each.
//
// Continuous batching within a token budget: running decodes first, then
// running prefills (chunked), then waiting sequences in arrival order, bounded
// by max_num_seqs, by free KV blocks, by max_logits_rows (a scored prompt's
// chunk is cut where its scored positions would exceed the rows left in the
// step, so a long score never needs a huge logits buffer; a sequence with
// none left waits for the next step) and by adapter slots: a running sequence
// pins its adapter's slot, so at most max_loras adapters run in one step. A
// waiting sequence whose adapter is still loading or has no free slot stays
// queued while later ones go on; once it has waited kMaxSlotWaits steps for a
// slot, nothing is admitted past it until a slot frees (no starvation).
// When a running sequence needs a block
// and none is free, the most recently arrived running sequence is preempted:
// its blocks are freed and it returns to the head of the queue to be
// recomputed later. Policy only: blocks come from the BlockManager.
// Not thread-safe: owned and called by the step loop.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "adapters/adapter_cache.h"
#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace loragate {

struct SchedulerOptions {
  int64_t max_num_batched_tokens = 512;  // tokens per step, all sequences together
  int32_t max_num_seqs = 64;             // sequences running at once
  int64_t max_logits_rows = 256;         // scored prompt positions per step, all sequences together
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;  // tokens to compute this step, from seq->num_computed()
};

class Scheduler {
 public:
  static constexpr int32_t kMaxSlotWaits = 8;

  // `adapters` may be null when the engine serves the base alone.
  Scheduler(SchedulerOptions options, BlockManager* blocks, AdapterCache* adapters);

  void add(Sequence* seq);  // joins the queue
  // Removes `seq` wherever it is and frees its blocks.
  void remove(Sequence* seq);
  // Plans one step; KV blocks for every chunk are allocated on return.
  std::vector<ScheduledChunk> schedule();
  // Drops finished sequences from the running set and frees their blocks and slots.
  void release_finished();
  // Sequences that failed while queued (their adapter did not load), to retire.
  std::vector<Sequence*> take_failed();

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  int64_t num_preemptions() const { return preemptions_; }

 private:
  // What a step has left to hand out.
  struct StepBudget {
    int64_t tokens;
    int64_t scored_rows;
  };
  // Tokens of `seq` to compute this step: all its uncomputed ones, cut to the
  // tokens and scored rows left; 0 when it has a scored row next and none are left.
  static int64_t chunk_for(const Sequence* seq, const StepBudget& budget);
  // Takes a planned chunk's tokens and scored rows from the budget.
  static void spend(const Sequence* seq, int64_t chunk, StepBudget& budget);
  void preempt(Sequence* victim, std::vector<ScheduledChunk>& planned, StepBudget& budget);
  void release_slot(Sequence* seq);
  void admit_waiting(std::vector<ScheduledChunk>& planned, StepBudget& budget);

  SchedulerOptions options_;
  BlockManager* blocks_;
  AdapterCache* adapters_;
  std::vector<Sequence*> failed_;
  std::deque<Sequence*> waiting_;   // arrival order; preempted sequences go back to the front
  std::vector<Sequence*> running_;  // arrival order
  int64_t preemptions_ = 0;
};

}  // namespace loragate

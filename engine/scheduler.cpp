#include "engine/scheduler.h"

#include <algorithm>
#include <utility>

namespace loragate {

Scheduler::Scheduler(SchedulerOptions options, BlockManager* blocks, AdapterCache* adapters)
    : options_(options), blocks_(blocks), adapters_(adapters) {}

void Scheduler::release_slot(Sequence* seq) {
  if (seq->lora_slot >= 0 && adapters_ != nullptr) adapters_->release(seq->lora_slot);
  seq->lora_slot = -1;
}

std::vector<Sequence*> Scheduler::take_failed() { return std::exchange(failed_, {}); }

void Scheduler::add(Sequence* seq) { waiting_.push_back(seq); }

void Scheduler::remove(Sequence* seq) {
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  blocks_->release(seq->blocks());
  release_slot(seq);
}

int64_t Scheduler::chunk_for(const Sequence* seq, const StepBudget& budget) {
  return std::min({seq->num_uncomputed(), budget.tokens, seq->max_chunk_for_scored_rows(budget.scored_rows)});
}

void Scheduler::spend(const Sequence* seq, int64_t chunk, StepBudget& budget) {
  budget.tokens -= chunk;
  budget.scored_rows -= seq->scored_positions(chunk);
}

void Scheduler::preempt(Sequence* victim, std::vector<ScheduledChunk>& planned, StepBudget& budget) {
  auto it = std::find_if(planned.begin(), planned.end(), [victim](const ScheduledChunk& c) { return c.seq == victim; });
  if (it != planned.end()) {
    budget.tokens += it->num_tokens;
    budget.scored_rows += victim->scored_positions(it->num_tokens);
    planned.erase(it);
  }
  running_.erase(std::remove(running_.begin(), running_.end(), victim), running_.end());
  blocks_->release(victim->blocks());
  release_slot(victim);
  victim->reset_computed();
  ++victim->preemptions;
  ++preemptions_;
  waiting_.push_front(victim);
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  std::vector<ScheduledChunk> planned;
  StepBudget budget{options_.max_num_batched_tokens, options_.max_logits_rows};
  bool preempted = false;

  // Running sequences: decodes first so a long prompt never stalls them.
  for (bool decode_pass : {true, false}) {
    for (size_t i = 0; i < running_.size() && budget.tokens > 0; ++i) {
      Sequence* seq = running_[i];
      if (seq->in_prefill() == decode_pass) continue;
      const int64_t chunk = chunk_for(seq, budget);
      if (chunk == 0) continue;  // no scored rows left this step
      const int64_t target = seq->num_computed() + chunk;
      bool self_preempted = false;
      while (!blocks_->can_grow(seq->blocks(), target)) {
        Sequence* victim = running_.back();  // the most recent arrival
        preempt(victim, planned, budget);
        preempted = true;
        if (victim == seq) {
          self_preempted = true;
          break;
        }
      }
      if (self_preempted) break;  // seq was the newest: nothing after it is left
      (void)blocks_->grow(seq->blocks(), target);  // cannot fail: can_grow held
      planned.push_back({seq, chunk});
      spend(seq, chunk, budget);
    }
  }

  // Waiting sequences join only in a step that did not have to preempt: they would only thrash.
  if (!preempted) admit_waiting(planned, budget);
  return planned;
}

void Scheduler::admit_waiting(std::vector<ScheduledChunk>& planned, StepBudget& budget) {
  bool starving_ahead = false;  // an earlier sequence has waited too long for a slot
  for (auto it = waiting_.begin(); it != waiting_.end() && budget.tokens > 0 && !starving_ahead &&
                                   running_.size() < static_cast<size_t>(options_.max_num_seqs);) {
    Sequence* seq = *it;
    const int64_t chunk = chunk_for(seq, budget);
    if (chunk == 0) {  // no scored rows left this step; sequences that score nothing may go on
      ++it;
      continue;
    }
    bool acquired_now = false;
    if (!seq->adapter.empty() && seq->lora_slot < 0) {
      const AdapterCache::AcquireResult got = adapters_ != nullptr
          ? adapters_->acquire(seq->adapter)
          : AdapterCache::AcquireResult{AdapterCache::Acquire::kFailed, -1, Status::not_found("no adapters configured")};
      if (got.state == AdapterCache::Acquire::kFailed) {
        seq->fail(got.error);
        failed_.push_back(seq);
        it = waiting_.erase(it);
        continue;
      }
      if (got.state != AdapterCache::Acquire::kReady) {  // loading, or every slot pinned: others go on
        if (got.state == AdapterCache::Acquire::kWaitSlot && ++seq->slot_waits > kMaxSlotWaits) starving_ahead = true;
        ++it;
        continue;
      }
      seq->lora_slot = got.slot;
      acquired_now = true;
    }
    if (!blocks_->can_grow(seq->blocks(), seq->num_computed() + chunk)) {
      if (acquired_now) release_slot(seq);
      break;  // FCFS for KV blocks: nobody passes a sequence that does not fit
    }
    (void)blocks_->grow(seq->blocks(), seq->num_computed() + chunk);
    seq->slot_waits = 0;
    it = waiting_.erase(it);
    auto pos = std::lower_bound(running_.begin(), running_.end(), seq,
                                [](const Sequence* a, const Sequence* b) { return a->id() < b->id(); });
    running_.insert(pos, seq);
    planned.push_back({seq, chunk});
    spend(seq, chunk, budget);
  }
}

void Scheduler::release_finished() {
  auto done = std::stable_partition(running_.begin(), running_.end(), [](Sequence* s) { return !s->finished(); });
  for (auto it = done; it != running_.end(); ++it) {
    blocks_->release((*it)->blocks());
    release_slot(*it);
  }
  running_.erase(done, running_.end());
}

}  // namespace loragate

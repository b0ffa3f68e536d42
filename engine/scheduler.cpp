#include "engine/scheduler.h"

#include <algorithm>
#include <set>
#include <utility>

namespace loragate {
namespace {

constexpr RequestPriority kLive = RequestPriority::kLive;
constexpr RequestPriority kBackground = RequestPriority::kBackground;

int32_t blocks_held(const BlockTable& table) {
  return static_cast<int32_t>(std::count_if(table.begin(), table.end(), [](int32_t b) { return b != kNoBlock; }));
}

}  // namespace

Scheduler::Scheduler(SchedulerOptions options, BlockManager* blocks, AdapterCache* adapters, std::string prefix_key)
    : options_(options), blocks_(blocks), adapters_(adapters), prefix_key_(std::move(prefix_key)) {}

int32_t Scheduler::attach_cached_prefix(Sequence* seq) {
  if (!blocks_->prefix_caching()) return 0;
  static const std::string kNoAdapter;
  const std::string& adapter =
      seq->lora_slot >= 0 && adapters_ != nullptr ? adapters_->slot_kv_identity(seq->lora_slot) : kNoAdapter;
  seq->set_chain_root(prefix_chain_root(prefix_key_, adapter, seq->cache_salt));
  const int32_t block = blocks_->block_size();
  const int32_t most = static_cast<int32_t>(seq->max_cached_tokens() / block);
  const std::vector<BlockHash>& chain = seq->chain(most, block);
  const int32_t n = blocks_->match(chain, most);
  blocks_->share(seq->blocks(), chain, n);
  seq->start_from_cache(static_cast<int64_t>(n) * block);
  return n;
}

void Scheduler::detach_cached_prefix(Sequence* seq) {
  blocks_->release(seq->blocks());
  seq->reset_computed();
}

void Scheduler::release_slot(Sequence* seq) {
  if (seq->lora_slot >= 0 && adapters_ != nullptr) adapters_->release(seq->lora_slot);
  seq->lora_slot = -1;
}

std::vector<Sequence*> Scheduler::take_failed() { return std::exchange(failed_, {}); }

void Scheduler::add(Sequence* seq) { queue(seq->priority).push_back(seq); }

void Scheduler::remove(Sequence* seq) {
  for (std::deque<Sequence*>& waiting : waiting_) {
    waiting.erase(std::remove(waiting.begin(), waiting.end(), seq), waiting.end());
  }
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  blocks_->release(seq->blocks());
  release_slot(seq);
}

bool Scheduler::has_live_work() const {
  return !queue(kLive).empty() ||
         std::any_of(running_.begin(), running_.end(), [](const Sequence* s) { return s->priority == kLive; });
}

int64_t Scheduler::chunk_for(const Sequence* seq, const StepBudget& budget) {
  return std::min({seq->num_uncomputed(), budget.tokens, seq->max_chunk_for_scored_rows(budget.scored_rows)});
}

void Scheduler::spend(const Sequence* seq, int64_t chunk, StepBudget& budget) {
  budget.tokens -= chunk;
  budget.scored_rows -= seq->scored_positions(chunk);
}

bool Scheduler::is_running(const Sequence* seq) const {
  return std::find(running_.begin(), running_.end(), seq) != running_.end();
}

Sequence* Scheduler::newest_running(RequestPriority p) const {
  auto it = std::find_if(running_.rbegin(), running_.rend(), [p](const Sequence* s) { return s->priority == p; });
  return it == running_.rend() ? nullptr : *it;
}

Sequence* Scheduler::victim_for(RequestPriority p) const {
  Sequence* background = newest_running(kBackground);
  if (background != nullptr || p == kBackground) return background;
  return newest_running(kLive);
}

void Scheduler::preempt(Sequence* victim, Plan& plan, StepBudget& budget) {
  auto it = std::find_if(plan.chunks.begin(), plan.chunks.end(),
                         [victim](const ScheduledChunk& c) { return c.seq == victim; });
  if (it != plan.chunks.end()) {
    budget.tokens += it->num_tokens;
    budget.scored_rows += victim->scored_positions(it->num_tokens);
    plan.chunks.erase(it);
  }
  running_.erase(std::remove(running_.begin(), running_.end(), victim), running_.end());
  blocks_->release(victim->blocks());
  release_slot(victim);
  victim->reset_computed();
  ++victim->preemptions;
  ++preemptions_;
  (victim->priority == kLive ? plan.preempted_live : plan.preempted_background) = true;
  queue(victim->priority).push_front(victim);
}

bool Scheduler::free_slot_held_by_background(Plan& plan, StepBudget& budget) {
  std::set<int32_t> live_slots;
  for (const Sequence* s : running_) {
    if (s->priority == kLive && s->lora_slot >= 0) live_slots.insert(s->lora_slot);
  }
  auto holder = std::find_if(running_.rbegin(), running_.rend(), [&](const Sequence* s) {
    return s->priority == kBackground && s->lora_slot >= 0 && live_slots.count(s->lora_slot) == 0;
  });
  if (holder == running_.rend()) return false;
  const int32_t slot = (*holder)->lora_slot;
  std::vector<Sequence*> on_slot;
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {  // newest first, as preemption always goes
    if ((*it)->priority == kBackground && (*it)->lora_slot == slot) on_slot.push_back(*it);
  }
  for (Sequence* victim : on_slot) preempt(victim, plan, budget);
  return true;
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  Plan plan;
  StepBudget budget{options_.max_num_batched_tokens, options_.max_logits_rows};
  plan_running(kLive, plan, budget);
  // Live waiting sequences join only in a step that preempted no live one
  // (they would only thrash); background ones only in a step that preempted
  // nobody and left no live one waiting for room (they would take it).
  const bool live_left_waiting = !plan.preempted_live && admit_waiting(kLive, plan, budget);

  // Background work: what live work left, capped so the step stays short.
  StepBudget background{std::min(budget.tokens, options_.max_background_tokens), budget.scored_rows};
  plan_running(kBackground, plan, background);
  if (!plan.preempted_live && !plan.preempted_background && !live_left_waiting) {
    admit_waiting(kBackground, plan, background);
  }
  return std::move(plan.chunks);
}

void Scheduler::plan_running(RequestPriority p, Plan& plan, StepBudget& budget) {
  for (bool decode_pass : {true, false}) {
    std::vector<Sequence*> lane;
    for (Sequence* s : running_) {
      if (s->priority == p && s->in_prefill() != decode_pass) lane.push_back(s);
    }
    for (Sequence* seq : lane) {
      if (budget.tokens <= 0) break;
      if (!is_running(seq)) continue;  // preempted to make room for an earlier one
      const int64_t chunk = chunk_for(seq, budget);
      if (chunk == 0) continue;  // no scored rows left this step
      const int64_t target = seq->num_computed() + chunk;
      bool self_preempted = false;
      while (!blocks_->can_grow(seq->blocks(), target)) {
        Sequence* victim = victim_for(p);  // never null: seq itself is running
        preempt(victim, plan, budget);
        if (victim == seq) {
          self_preempted = true;
          break;
        }
      }
      if (self_preempted) break;  // seq was the newest of its class: nothing after it is left
      (void)blocks_->grow(seq->blocks(), target);  // cannot fail: can_grow held
      plan.chunks.push_back({seq, chunk});
      spend(seq, chunk, budget);
    }
  }
}

bool Scheduler::admit_waiting(RequestPriority p, Plan& plan, StepBudget& budget) {
  const bool live = p == kLive;
  std::deque<Sequence*>& waiting = queue(p);  // preemptions below push to the background queue only
  bool left_waiting = false;
  bool starving_ahead = false;  // an earlier sequence has waited too long for a slot
  for (auto it = waiting.begin(); it != waiting.end() && budget.tokens > 0 && !starving_ahead;) {
    Sequence* seq = *it;
    if (chunk_for(seq, budget) == 0) {  // no scored rows left this step; sequences that score nothing may go on
      ++it;
      continue;
    }
    bool acquired_now = false;
    if (!seq->adapter.empty() && seq->lora_slot < 0) {
      auto acquire = [&] {
        return adapters_ != nullptr ? adapters_->acquire(seq->adapter)
                                    : AdapterCache::AcquireResult{AdapterCache::Acquire::kFailed, -1,
                                                                  Status::not_found("no adapters configured")};
      };
      AdapterCache::AcquireResult got = acquire();
      while (live && got.state == AdapterCache::Acquire::kWaitSlot && free_slot_held_by_background(plan, budget)) {
        got = acquire();
      }
      if (got.state == AdapterCache::Acquire::kFailed) {
        seq->fail(got.error);
        failed_.push_back(seq);
        it = waiting.erase(it);
        continue;
      }
      if (got.state != AdapterCache::Acquire::kReady) {  // loading, or every slot pinned: others go on
        if (got.state == AdapterCache::Acquire::kWaitSlot) {
          left_waiting = true;
          if (++seq->slot_waits > kMaxSlotWaits) starving_ahead = true;
        }
        ++it;
        continue;
      }
      seq->lora_slot = got.slot;
      acquired_now = true;
    }
    const int32_t shared = attach_cached_prefix(seq);
    const int64_t chunk = chunk_for(seq, budget);  // what is left after the cached prefix
    if (chunk == 0) {  // the cached prefix ends where the scored rows left run out
      detach_cached_prefix(seq);
      if (acquired_now) release_slot(seq);
      ++it;
      continue;
    }
    // A seat and blocks: a live sequence takes them from background ones,
    // unless even all theirs would not do (then nobody is preempted for nothing).
    const int64_t target = seq->num_computed() + chunk;
    const size_t seats = static_cast<size_t>(options_.max_num_seqs);
    auto fits = [&] { return running_.size() < seats && blocks_->can_grow(seq->blocks(), target); };
    if (live && !fits()) {
      size_t background_seqs = 0;
      int32_t background_blocks = 0;
      for (Sequence* s : running_) {
        if (s->priority != kBackground) continue;
        ++background_seqs;
        background_blocks += blocks_held(s->blocks());
      }
      const bool room_behind_background =
          running_.size() - background_seqs < seats &&
          blocks_->blocks_needed(seq->blocks(), target) <= blocks_->num_free() + background_blocks;
      // Blocks shared with others may stay held: stop when no background sequence is left.
      while (room_behind_background && !fits() && newest_running(kBackground) != nullptr) {
        preempt(newest_running(kBackground), plan, budget);
      }
    }
    if (!fits()) {
      detach_cached_prefix(seq);
      if (acquired_now) release_slot(seq);
      left_waiting = true;
      break;  // FCFS for seats and KV blocks: nobody of this class passes a sequence that does not fit
    }
    (void)blocks_->grow(seq->blocks(), target);
    if (blocks_->prefix_caching()) {
      const int64_t cached = static_cast<int64_t>(shared) * blocks_->block_size();
      prefix_queries_ += seq->total_len();
      prefix_hits_ += cached;
      if (seq->cached_tokens < 0) seq->cached_tokens = cached;
      seq->registered_blocks = shared;
    }
    seq->slot_waits = 0;
    it = waiting.erase(it);
    auto pos = std::lower_bound(running_.begin(), running_.end(), seq,
                                [](const Sequence* a, const Sequence* b) { return a->id() < b->id(); });
    running_.insert(pos, seq);
    plan.chunks.push_back({seq, chunk});
    spend(seq, chunk, budget);
  }
  return left_waiting || starving_ahead;
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

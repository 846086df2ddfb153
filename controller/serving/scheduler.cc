#include "controller/serving/scheduler.h"

#include <algorithm>
#include <utility>

#include "worker/sampling/speculative.h"

namespace tessera::serving {

Scheduler::Scheduler(SchedulerLimits limits, BlockManager* blocks)
    : limits_(limits), blocks_(blocks) {
  limits_.max_num_seqs = std::max(limits_.max_num_seqs, 1);
  limits_.max_num_batched_tokens = std::max(limits_.max_num_batched_tokens, 1);
}

void Scheduler::Enqueue(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

void Scheduler::ReleaseBlocks(Sequence& seq) {
  blocks_->Release(seq.block_table);
  seq.num_computed = 0;
  seq.cache_committed = 0;
}

void Scheduler::Preempt(size_t running_index) {
  std::unique_ptr<Sequence> seq = std::move(running_[running_index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(running_index));
  ReleaseBlocks(*seq);
  ++preemptions_;
  waiting_.push_front(std::move(seq));
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  int64_t budget = limits_.max_num_batched_tokens;
  auto add = [&](Sequence* s, int64_t n) {
    ScheduledChunk c;
    c.seq = s;
    c.start = s->num_computed;
    c.n_tokens = static_cast<int32_t>(n);
    c.sample = s->num_computed + n == static_cast<int64_t>(s->tokens.size());
    const bool decode = n == 1 && c.sample && s->generated() > 0;
    (decode ? plan.decode_tokens : plan.prefill_tokens) += n;
    plan.chunks.push_back(c);
    budget -= n;
  };

  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i].get();
    const int64_t n = std::min(s->uncomputed(), budget);
    // A decode may carry drafts: as many as the budget, the tokens the request may still
    // generate and the option allow.
    std::vector<int32_t> drafts;
    if (s->speculate && limits_.num_speculative_tokens > 0 && n == 1 && s->uncomputed() == 1 &&
        s->generated() > 0) {
      const int64_t room = std::min<int64_t>(
          {limits_.num_speculative_tokens, budget - 1, s->max_tokens - s->generated() - 1});
      if (room > 0 && limits_.mtp) {
        drafts.assign(s->mtp_drafts.begin(),
                      s->mtp_drafts.begin() +
                          std::min<int64_t>(room, static_cast<int64_t>(s->mtp_drafts.size())));
      } else if (room > 0) {
        drafts = s->ngram_index.Draft(s->tokens, {.min_n = limits_.ngram_min,
                                                  .max_n = limits_.ngram_max,
                                                  .max_draft = static_cast<int>(room)});
      }
    }
    // Drafts never preempt anyone: without the blocks for them, the decode goes alone.
    if (!drafts.empty() &&
        !blocks_->Reserve(s->block_table,
                          s->num_computed + n + static_cast<int64_t>(drafts.size()))) {
      drafts.clear();
    }
    bool preempted_self = false;
    while (!blocks_->Reserve(s->block_table, s->num_computed + n)) {
      // The newest running sequence gives its blocks up; it has not been planned yet (the
      // ones before `i` are older), unless it is `s` itself.
      const size_t victim = running_.size() - 1;
      preempted_self = victim == i;
      Preempt(victim);
      ++plan.preempted;
      if (preempted_self) break;
    }
    if (preempted_self) {
      if (running_.empty()) plan.cannot_fit = s;
      break;
    }
    add(s, n);
    if (!drafts.empty()) {
      plan.draft_tokens += static_cast<int64_t>(drafts.size());
      plan.decode_tokens += static_cast<int64_t>(drafts.size());
      budget -= static_cast<int64_t>(drafts.size());
      plan.chunks.back().drafts = std::move(drafts);
    }
    ++i;
  }

  if (plan.preempted > 0) return plan;
  while (budget > 0 && !waiting_.empty() &&
         static_cast<int>(running_.size()) < limits_.max_num_seqs) {
    Sequence* s = waiting_.front().get();
    if (s->block_table.empty() && s->num_computed == 0 && !s->tokens.empty()) {
      // Reuse what the cache holds of its tokens, all but the last (fed to sample from).
      const int max_blocks = static_cast<int>((s->tokens.size() - 1) / blocks_->block_size());
      const int hit =
          blocks_->AcquirePrefix(s->block_table, s->tokens, s->request.cache_salt, max_blocks);
      s->num_computed = static_cast<int64_t>(hit) * blocks_->block_size();
      s->cache_committed = hit;
    }
    const int64_t n = std::min(s->uncomputed(), budget);
    if (!blocks_->Reserve(s->block_table, s->num_computed + n)) {
      ReleaseBlocks(*s);  // the matched blocks too, until it fits
      break;
    }
    if (s->cached_tokens < 0) {
      s->cached_tokens = static_cast<int32_t>(s->num_computed);
      if (blocks_->prefix_caching()) {
        plan.prefix_queried_tokens += s->prompt_len;
        plan.prefix_hit_tokens += s->num_computed;
      }
    }
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    add(s, n);
  }
  return plan;
}

bool Scheduler::HeadCannotFit() const {
  if (!running_.empty() || waiting_.empty()) return false;
  const Sequence& s = *waiting_.front();
  return blocks_->BlocksFor(std::min<int64_t>(s.uncomputed(), limits_.max_num_batched_tokens)) >
         blocks_->total_blocks();
}

void Scheduler::CacheComputed(Sequence* seq) {
  blocks_->CacheFullBlocks(seq->block_table, seq->tokens, seq->request.cache_salt,
                           seq->num_computed, &seq->cache_committed);
}

absl::Status Scheduler::CheckBlocks() const {
  std::vector<const std::vector<int32_t>*> tables;
  for (const auto& s : running_) tables.push_back(&s->block_table);
  for (const auto& s : waiting_) tables.push_back(&s->block_table);
  return blocks_->CheckInvariants(tables);
}

std::unique_ptr<Sequence> Scheduler::Remove(Sequence* seq) {
  std::unique_ptr<Sequence> out;
  auto take = [&](auto& list) {
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& p) { return p.get() == seq; });
    if (it == list.end()) return false;
    out = std::move(*it);
    list.erase(it);
    return true;
  };
  if (!take(running_)) take(waiting_);
  if (out) blocks_->Release(out->block_table);
  return out;
}

}  // namespace tessera::serving

// The replica scheduler: three phases per step (decode, prefill chunks, admissions) over per-rank
// budgets and per-rank KV block pools.
#include "engine/serve/scheduler.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace moesim::engine::serve {

const char* reject_reason_name(AddResult result) {
  switch (result) {
    case AddResult::kQueued:
      return "";
    case AddResult::kRejectedContextTooLong:
      return "context_too_long";
    case AddResult::kRejectedKvCapacity:
      return "kv_capacity";
    case AddResult::kRejectedQueueFull:
      return "queue_full";
    case AddResult::kRejectedPromptOverBudget:
      return "prompt_over_budget";
  }
  return "?";
}

int64_t StepPlan::num_tokens() const {
  int64_t tokens = 0;
  for (const PlannedSequence& s : sequences) tokens += s.new_tokens;
  return tokens;
}

// Tokens left in this step: per rank and for the step as a whole. When the step's total runs
// out, every rank's budget is 0.
struct Scheduler::Budget {
  std::vector<int64_t> rank_left;
  int64_t step_left = std::numeric_limits<int64_t>::max();

  int64_t available(int32_t rank) const {
    return std::max<int64_t>(0, std::min(rank_left[rank], step_left));
  }
  void take(int32_t rank, int64_t tokens) {
    rank_left[rank] = std::max<int64_t>(0, rank_left[rank] - tokens);
    step_left = std::max<int64_t>(0, step_left - tokens);
  }
};

namespace {

void require(bool ok, const std::string& field, const std::string& rule, int64_t value) {
  if (!ok) {
    throw std::invalid_argument("scheduler." + field + ": must be " + rule + ", got " +
                                std::to_string(value));
  }
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config) : config_(config) {
  require(config.num_ranks >= 1 && config.num_ranks <= std::numeric_limits<int32_t>::max(),
          "num_ranks", ">= 1", config.num_ranks);
  require(config.max_seqs >= 1, "max_seqs", ">= 1", config.max_seqs);
  require(config.max_batch_tokens_per_gpu >= 1, "max_batch_tokens_per_gpu", ">= 1",
          config.max_batch_tokens_per_gpu);
  require(config.max_step_tokens == -1 || config.max_step_tokens >= 1, "max_step_tokens",
          "-1 or >= 1", config.max_step_tokens);
  require(config.kv_block_tokens >= 1, "kv_block_tokens", ">= 1", config.kv_block_tokens);
  require(config.kv_blocks_per_rank >= 1, "kv_blocks_per_rank", ">= 1", config.kv_blocks_per_rank);
  require(config.max_queued_requests == -1 || config.max_queued_requests >= 1,
          "max_queued_requests", "-1 or >= 1", config.max_queued_requests);
  require(config.max_context_tokens >= 0, "max_context_tokens", ">= 0", config.max_context_tokens);
  running_.resize(config.num_ranks);
  free_blocks_.assign(config.num_ranks, config.kv_blocks_per_rank);
}

int64_t Scheduler::blocks_for(int64_t tokens) const {
  return tokens / config_.kv_block_tokens + (tokens % config_.kv_block_tokens != 0 ? 1 : 0);
}

AddResult Scheduler::add(const ServeRequest& request) {
  if (request.prompt_tokens < 1 || request.output_tokens < 1) {
    throw std::invalid_argument("request " + std::to_string(request.request_id) +
                                ": prompt and output tokens must be >= 1");
  }
  if (sequences_.count(request.request_id) != 0) {
    throw std::invalid_argument("request " + std::to_string(request.request_id) +
                                " is already in flight");
  }
  // Saturating: a trace may hold any int64 token counts.
  const int64_t total_tokens =
      request.prompt_tokens > std::numeric_limits<int64_t>::max() - request.output_tokens
          ? std::numeric_limits<int64_t>::max()
          : request.prompt_tokens + request.output_tokens;
  if (config_.max_context_tokens > 0 && total_tokens > config_.max_context_tokens) {
    return AddResult::kRejectedContextTooLong;
  }
  if (blocks_for(total_tokens) > config_.kv_blocks_per_rank) return AddResult::kRejectedKvCapacity;
  if (!config_.chunked_prefill) {
    int64_t whole_budget = config_.max_batch_tokens_per_gpu;
    if (config_.max_step_tokens > 0) whole_budget = std::min(whole_budget, config_.max_step_tokens);
    if (request.prompt_tokens > whole_budget) return AddResult::kRejectedPromptOverBudget;
  }
  if (config_.max_queued_requests > 0 &&
      static_cast<int64_t>(queue_.size()) >= config_.max_queued_requests) {
    return AddResult::kRejectedQueueFull;
  }
  Sequence seq;
  seq.request = request;
  seq.prefill_target = request.prompt_tokens;
  sequences_.emplace(request.request_id, seq);
  queue_.push_back(request.request_id);
  return AddResult::kQueued;
}

int64_t Scheduler::newest_on(int32_t rank) const {
  int64_t newest = -1;
  int64_t newest_seq = -1;
  for (int64_t id : running_[rank]) {
    const int64_t admit_seq = sequences_.at(id).admit_seq;
    if (admit_seq > newest_seq) {
      newest_seq = admit_seq;
      newest = id;
    }
  }
  return newest;
}

void Scheduler::preempt(int64_t request_id, StepPlan& plan) {
  Sequence& seq = sequences_.at(request_id);
  std::vector<int64_t>& on_rank = running_[seq.rank];
  on_rank.erase(std::find(on_rank.begin(), on_rank.end(), request_id));
  free_blocks_[seq.rank] += seq.blocks;
  seq.blocks = 0;
  seq.rank = -1;
  seq.admit_seq = -1;
  seq.kv_tokens = 0;
  seq.prefill_target = seq.request.prompt_tokens + seq.generated;
  ++preemptions_[request_id];
  queue_.push_front(request_id);
  plan.preempted.push_back(request_id);
}

void Scheduler::plan_decodes(Budget& budget, StepPlan& plan) {
  for (int32_t rank = 0; rank < config_.num_ranks; ++rank) {
    const std::vector<int64_t> order = running_[rank];  // admission order; preemption edits it
    for (int64_t id : order) {
      auto it = sequences_.find(id);
      Sequence& seq = it->second;
      if (seq.rank != rank || seq.kv_tokens < seq.prefill_target) continue;  // preempted, prefill
      bool runs = true;
      if (blocks_for(seq.kv_tokens + 1) > seq.blocks) {
        while (free_blocks_[rank] == 0) {
          const int64_t victim = newest_on(rank);
          preempt(victim, plan);
          if (victim == id) {
            runs = false;
            break;
          }
        }
        if (runs) {
          --free_blocks_[rank];
          ++seq.blocks;
        }
      }
      if (!runs) continue;
      plan.sequences.push_back(PlannedSequence{id, rank, false, 1, seq.kv_tokens, true});
      budget.take(rank, 1);
    }
  }
}

int64_t Scheduler::prefill_chunk(const Sequence& seq, const Budget& budget) const {
  const int64_t remaining = seq.prefill_target - seq.kv_tokens;
  const int64_t available = budget.available(seq.rank);
  if (config_.chunked_prefill) return std::min(remaining, available);
  int64_t whole_budget = config_.max_batch_tokens_per_gpu;
  if (config_.max_step_tokens > 0) whole_budget = std::min(whole_budget, config_.max_step_tokens);
  // A recomputation longer than any step's budget could never run whole: it runs in chunks.
  if (remaining > whole_budget) return std::min(remaining, available);
  return remaining <= available ? remaining : 0;
}

void Scheduler::plan_prefills(Budget& budget, StepPlan& plan) {
  std::vector<const Sequence*> prefilling;
  for (const std::vector<int64_t>& on_rank : running_) {
    for (int64_t id : on_rank) {
      const Sequence& seq = sequences_.at(id);
      if (seq.kv_tokens < seq.prefill_target) prefilling.push_back(&seq);
    }
  }
  std::sort(prefilling.begin(), prefilling.end(),
            [](const Sequence* a, const Sequence* b) { return a->admit_seq < b->admit_seq; });
  for (const Sequence* seq : prefilling) {
    const int64_t chunk = prefill_chunk(*seq, budget);
    if (chunk == 0) continue;
    plan.sequences.push_back(PlannedSequence{seq->request.request_id, seq->rank, true, chunk,
                                             seq->kv_tokens,
                                             seq->kv_tokens + chunk == seq->prefill_target});
    budget.take(seq->rank, chunk);
  }
}

int32_t Scheduler::pick_rank(const Sequence& seq, const Budget& budget) const {
  const int64_t blocks = blocks_for(seq.prefill_target);
  int32_t best = -1;
  int64_t best_room = 0;
  for (int32_t rank = 0; rank < config_.num_ranks; ++rank) {
    if (budget.available(rank) == 0 || blocks > free_blocks_[rank]) continue;
    Sequence placed = seq;
    placed.rank = rank;
    if (prefill_chunk(placed, budget) == 0) continue;
    const int64_t room = free_blocks_[rank] - 4 * static_cast<int64_t>(running_[rank].size());
    if (best < 0 || room > best_room) {
      best = rank;
      best_room = room;
    }
  }
  return best;
}

void Scheduler::plan_admissions(Budget& budget, StepPlan& plan) {
  // vLLM V1: a step that preempted admits nothing (the freed blocks went to running sequences).
  if (!plan.preempted.empty()) return;
  while (!queue_.empty() && num_running() < config_.max_seqs) {
    Sequence& seq = sequences_.at(queue_.front());
    const int32_t rank = pick_rank(seq, budget);
    if (rank < 0) break;  // no head-of-line bypass
    queue_.pop_front();
    seq.rank = rank;
    seq.admit_seq = next_admit_seq_++;
    seq.blocks = blocks_for(seq.prefill_target);
    free_blocks_[rank] -= seq.blocks;
    running_[rank].push_back(seq.request.request_id);
    plan.admitted.push_back(seq.request.request_id);
    const int64_t chunk = prefill_chunk(seq, budget);
    plan.sequences.push_back(PlannedSequence{seq.request.request_id, rank, true, chunk,
                                             seq.kv_tokens, chunk == seq.prefill_target});
    budget.take(rank, chunk);
  }
}

StepPlan Scheduler::plan_step() {
  if (plan_pending_) throw std::logic_error("plan_step: the previous plan was not finished");
  Budget budget;
  budget.rank_left.assign(config_.num_ranks, config_.max_batch_tokens_per_gpu);
  if (config_.max_step_tokens > 0) budget.step_left = config_.max_step_tokens;
  StepPlan plan;
  plan_decodes(budget, plan);
  plan_prefills(budget, plan);
  plan_admissions(budget, plan);
  // Rank-major; within a rank prefill chunks, then decode tokens (the contract's order; stable:
  // each in planning order).
  std::stable_sort(plan.sequences.begin(), plan.sequences.end(),
                   [](const PlannedSequence& a, const PlannedSequence& b) {
                     return a.rank != b.rank ? a.rank < b.rank : (a.prefill && !b.prefill);
                   });
  plan_pending_ = !plan.sequences.empty();
  pending_ = plan.sequences;
  return plan;
}

StepOutcome Scheduler::finish_step(const StepPlan& plan) {
  if (!plan_pending_ || plan.sequences != pending_) {
    throw std::logic_error("finish_step: not the plan of the last plan_step");
  }
  plan_pending_ = false;
  StepOutcome outcome;
  for (const PlannedSequence& p : plan.sequences) {
    Sequence& seq = sequences_.at(p.request_id);
    seq.kv_tokens += p.new_tokens;
    if (!p.emits_token) continue;
    if (++seq.generated == 1) outcome.first_token.push_back(p.request_id);
    if (seq.generated < seq.request.output_tokens) continue;
    outcome.finished.push_back(p.request_id);
    free_blocks_[seq.rank] += seq.blocks;
    std::vector<int64_t>& on_rank = running_[seq.rank];
    on_rank.erase(std::find(on_rank.begin(), on_rank.end(), p.request_id));
    sequences_.erase(p.request_id);
  }
  return outcome;
}

bool Scheduler::idle() const { return sequences_.empty(); }

int64_t Scheduler::outstanding() const { return static_cast<int64_t>(sequences_.size()); }

int64_t Scheduler::num_queued() const { return static_cast<int64_t>(queue_.size()); }

int64_t Scheduler::num_running() const {
  int64_t running = 0;
  for (const std::vector<int64_t>& on_rank : running_) running += on_rank.size();
  return running;
}

int64_t Scheduler::free_blocks(int32_t rank) const { return free_blocks_.at(rank); }

int64_t Scheduler::preemptions(int64_t request_id) const {
  auto it = preemptions_.find(request_id);
  return it == preemptions_.end() ? 0 : it->second;
}

int64_t Scheduler::generated_tokens(int64_t request_id) const {
  auto it = sequences_.find(request_id);
  return it == sequences_.end() ? 0 : it->second.generated;
}

}  // namespace moesim::engine::serve

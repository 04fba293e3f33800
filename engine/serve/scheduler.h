// One replica's continuous-batching scheduler for `moesim-engine serve`: pure, deterministic, no
// clock and no backend. The serve loop adds arrivals, asks for the next step's batch, executes
// it on the backend and reports it back; the scheduler decides who runs, with how many tokens,
// and what each step's KV blocks allow. The rules follow docs/serving.md "Replica scheduler"
// (the behaviour the simulator models) and vLLM V1 / SGLang where the docs leave a choice open:
// decode first, then prefill chunks, then admissions in arrival order without head-of-line
// bypass, KV blocks for the whole prompt reserved at admission, preemption by recompute of the
// most recently admitted sequence of a rank, and no admission in a step that preempted (vLLM
// V1). docs/engine.md "Serving: the scheduler" states the rules; the tests compute cases by hand.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace moesim::engine::serve {

// From the request trace header's "scheduler" and the admission policies (the concurrency cap
// overrides max_seqs and max_step_tokens). The constructor checks every field.
struct SchedulerConfig {
  int64_t num_ranks = 1;                    // attention ranks of the replica, >= 1
  int64_t max_seqs = 256;                   // sequences in flight per replica, >= 1
  int64_t max_batch_tokens_per_gpu = 2048;  // token budget of one step per rank, >= 1
  int64_t max_step_tokens = -1;             // tokens of one step, all ranks together; -1: no cap
  bool chunked_prefill = true;              // false: a prefill runs whole in one step
  int64_t kv_block_tokens = 64;             // tokens per KV block, >= 1
  int64_t kv_blocks_per_rank = 0;           // KV pool of one rank in blocks, >= 1
  int64_t max_queued_requests = -1;         // waiting requests at most; -1: no cap
  int64_t max_context_tokens = 0;           // prompt + output at most; 0: no limit
};

struct ServeRequest {
  int64_t request_id = 0;  // unique among the requests added to one scheduler
  int64_t arrival_ns = 0;
  int64_t prompt_tokens = 0;  // >= 1
  int64_t output_tokens = 0;  // >= 1, forced: the request generates exactly this many
};

// What add() did with an arrival. The names of the rejections are requests.csv's reject_reason
// (reject_reason_name).
enum class AddResult {
  kQueued,
  kRejectedContextTooLong,  // prompt + output > max_context_tokens
  kRejectedKvCapacity,      // ceil((prompt + output) / kv_block_tokens) > kv_blocks_per_rank
  kRejectedQueueFull,       // max_queued_requests requests were waiting
  // Without chunked prefill: the prompt is larger than the rank budget (or max_step_tokens), so
  // its prefill could never run whole.
  kRejectedPromptOverBudget,
};
// "context_too_long", "kv_capacity", "queue_full", "prompt_over_budget"; "" for kQueued.
const char* reject_reason_name(AddResult result);

// One sequence's work in a step.
struct PlannedSequence {
  int64_t request_id = 0;
  int32_t rank = 0;            // attention rank within the replica
  bool prefill = false;        // a prefill (or recompute) chunk; false: one decode token
  int64_t new_tokens = 0;      // tokens computed this step, >= 1
  int64_t context_tokens = 0;  // tokens already in the KV cache before this step
  bool emits_token = false;    // the last prefill chunk or a decode token: one output token

  bool operator==(const PlannedSequence&) const = default;
};

struct StepPlan {
  std::vector<PlannedSequence> sequences;  // rank-major; within a rank prefill, then decode
  std::vector<int64_t> preempted;          // preempted by recompute while planning this step
  // Admitted from the queue this step, in queue order (a preempted request again when it is
  // re-admitted: its first admission is its first_scheduled time).
  std::vector<int64_t> admitted;
  int64_t num_tokens() const;  // sum of new_tokens
  bool empty() const { return sequences.empty(); }
};

struct StepOutcome {
  std::vector<int64_t> first_token;  // requests whose first output token this step emitted
  std::vector<int64_t> finished;     // requests that emitted their last token (KV freed)
};

class Scheduler {
 public:
  // Throws std::invalid_argument naming the field on a bad config.
  explicit Scheduler(const SchedulerConfig& config);

  // An arrival: rejected (checks in the order of AddResult) or put at the back of the queue.
  // Throws std::invalid_argument on prompt or output < 1 or a request_id in flight.
  AddResult add(const ServeRequest& request);

  // The next step's batch; empty when nothing can run. Changes the state (admissions, KV
  // reservations, preemptions): every non-empty plan must be passed to finish_step() before the
  // next plan_step(). Calling it again before then throws std::logic_error.
  StepPlan plan_step();
  // Applies the step `plan` (the last plan_step()'s): advances tokens, emits output tokens,
  // frees the KV blocks of finished requests. Throws std::logic_error for another plan.
  StepOutcome finish_step(const StepPlan& plan);

  bool idle() const;            // nothing queued, nothing running
  int64_t outstanding() const;  // queued + running (least_outstanding routing)
  int64_t num_queued() const;
  int64_t num_running() const;
  int64_t free_blocks(int32_t rank) const;
  // Times `request_id` was preempted (0 for an unknown id).
  int64_t preemptions(int64_t request_id) const;
  // Output tokens emitted so far by `request_id` while in flight (0 once finished or unknown:
  // a finished request emitted its output_tokens).
  int64_t generated_tokens(int64_t request_id) const;
  const SchedulerConfig& config() const { return config_; }

 private:
  struct Sequence {
    ServeRequest request;
    int32_t rank = -1;           // -1 while queued
    int64_t admit_seq = -1;      // admission order (larger: admitted later)
    int64_t prefill_target = 0;  // tokens to put in KV before decoding: prompt + generated
    int64_t kv_tokens = 0;       // tokens in the KV cache
    int64_t generated = 0;       // output tokens emitted
    int64_t blocks = 0;          // KV blocks held
  };
  struct Budget;

  int64_t blocks_for(int64_t tokens) const;
  void plan_decodes(Budget& budget, StepPlan& plan);
  void plan_prefills(Budget& budget, StepPlan& plan);
  void plan_admissions(Budget& budget, StepPlan& plan);
  // The most recently admitted running sequence of `rank`.
  int64_t newest_on(int32_t rank) const;
  void preempt(int64_t request_id, StepPlan& plan);
  // The rank the queue's head goes to, or -1.
  int32_t pick_rank(const Sequence& seq, const Budget& budget) const;
  int64_t prefill_chunk(const Sequence& seq, const Budget& budget) const;

  SchedulerConfig config_;
  std::map<int64_t, Sequence> sequences_;      // queued and running, by request id
  std::deque<int64_t> queue_;                  // waiting request ids, front first
  std::vector<std::vector<int64_t>> running_;  // per rank, in admission order
  std::vector<int64_t> free_blocks_;           // per rank
  std::map<int64_t, int64_t> preemptions_;     // every request ever preempted
  int64_t next_admit_seq_ = 0;
  bool plan_pending_ = false;
  std::vector<PlannedSequence> pending_;  // the plan finish_step() expects
};

}  // namespace moesim::engine::serve

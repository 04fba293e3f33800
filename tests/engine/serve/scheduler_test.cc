// The serving scheduler against cases computed by hand: chunk sizes, the step of the first token,
// decode steps, preemption by recompute, the caps, rank choice, rejections, head-of-line stop.
#include "engine/serve/scheduler.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace moesim::engine::serve {
namespace {

SchedulerConfig one_rank(int64_t budget, int64_t block_tokens, int64_t blocks) {
  SchedulerConfig c;
  c.num_ranks = 1;
  c.max_batch_tokens_per_gpu = budget;
  c.kv_block_tokens = block_tokens;
  c.kv_blocks_per_rank = blocks;
  return c;
}

ServeRequest req(int64_t id, int64_t prompt, int64_t output) {
  return ServeRequest{id, 0, prompt, output};
}

PlannedSequence prefill(int64_t id, int32_t rank, int64_t tokens, int64_t context, bool emits) {
  return PlannedSequence{id, rank, true, tokens, context, emits};
}
PlannedSequence decode(int64_t id, int32_t rank, int64_t context) {
  return PlannedSequence{id, rank, false, 1, context, true};
}

// Plans and finishes one step.
struct Step {
  StepPlan plan;
  StepOutcome outcome;
};
Step run_step(Scheduler& s) {
  Step step;
  step.plan = s.plan_step();
  if (!step.plan.empty()) step.outcome = s.finish_step(step.plan);
  return step;
}

using Ids = std::vector<int64_t>;
using Seqs = std::vector<PlannedSequence>;

TEST(Scheduler, ChunkedPrefillThenDecodeUntilTheForcedOutputLength) {
  // Budget 512: a 1200-token prompt runs as 512 + 512 + 176; the last chunk emits the first token
  // (TTFT at step 3), then one decode token per step until 3 tokens.
  Scheduler s(one_rank(512, 64, 100));
  ASSERT_EQ(s.add(req(7, 1200, 3)), AddResult::kQueued);
  Step s1 = run_step(s);
  EXPECT_EQ(s1.plan.sequences, (Seqs{prefill(7, 0, 512, 0, false)}));
  EXPECT_EQ(s1.plan.admitted, Ids{7});
  EXPECT_EQ(s.free_blocks(0), 100 - 19);  // ceil(1200 / 64) reserved at admission
  Step s2 = run_step(s);
  EXPECT_EQ(s2.plan.sequences, (Seqs{prefill(7, 0, 512, 512, false)}));
  EXPECT_TRUE(s2.outcome.first_token.empty());
  Step s3 = run_step(s);
  EXPECT_EQ(s3.plan.sequences, (Seqs{prefill(7, 0, 176, 1024, true)}));
  EXPECT_EQ(s3.outcome.first_token, Ids{7});
  EXPECT_EQ(s.generated_tokens(7), 1);
  Step s4 = run_step(s);
  EXPECT_EQ(s4.plan.sequences, (Seqs{decode(7, 0, 1200)}));
  EXPECT_TRUE(s4.outcome.finished.empty());
  Step s5 = run_step(s);
  EXPECT_EQ(s5.plan.sequences, (Seqs{decode(7, 0, 1201)}));
  EXPECT_EQ(s5.outcome.finished, Ids{7});
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.free_blocks(0), 100);
  EXPECT_TRUE(s.plan_step().empty());
}

TEST(Scheduler, DecodeTokensComeFirstAndTakeTheirShareOfTheBudget) {
  Scheduler s(one_rank(512, 64, 100));
  s.add(req(1, 100, 4));
  run_step(s);  // 1: whole prompt, first token
  s.add(req(2, 600, 2));
  Step s2 = run_step(s);
  // 1 decode token first, then 511 of request 2's prompt (the plan lists prefill first).
  EXPECT_EQ(s2.plan.sequences, (Seqs{prefill(2, 0, 511, 0, false), decode(1, 0, 100)}));
  Step s3 = run_step(s);
  EXPECT_EQ(s3.plan.sequences, (Seqs{prefill(2, 0, 89, 511, true), decode(1, 0, 101)}));
  EXPECT_EQ(s3.outcome.first_token, Ids{2});
  Step s4 = run_step(s);
  EXPECT_EQ(s4.plan.sequences, (Seqs{decode(1, 0, 102), decode(2, 0, 600)}));
  EXPECT_EQ(s4.outcome.finished, (Ids{1, 2}));
}

TEST(Scheduler, PreemptsTheNewestSequenceByRecomputeWhenBlocksRunOut) {
  // Blocks of 4 tokens, 4 blocks. A (8 + 5) and B (8 + 2) both fit at admission (2 blocks each);
  // A's first decode needs a third block: none free, so B (the newest) is preempted, A takes one
  // of B's blocks. B re-prefills prompt + its 1 generated token = 9 tokens (3 blocks) once A is
  // done.
  Scheduler s(one_rank(512, 4, 4));
  s.add(req(1, 8, 5));
  s.add(req(2, 8, 2));
  Step s1 = run_step(s);
  EXPECT_EQ(s1.plan.sequences, (Seqs{prefill(1, 0, 8, 0, true), prefill(2, 0, 8, 0, true)}));
  EXPECT_EQ(s1.outcome.first_token, (Ids{1, 2}));
  EXPECT_EQ(s.free_blocks(0), 0);
  Step s2 = run_step(s);
  EXPECT_EQ(s2.plan.preempted, Ids{2});
  EXPECT_EQ(s2.plan.sequences, (Seqs{decode(1, 0, 8)}));
  EXPECT_EQ(s.preemptions(2), 1);
  EXPECT_EQ(s.free_blocks(0), 1);
  EXPECT_EQ(s.num_queued(), 1);
  // A decodes to its 5th token (steps 3-5); B needs 3 blocks and waits while only 1 is free.
  for (int64_t context = 9; context <= 11; ++context) {
    Step step = run_step(s);
    EXPECT_EQ(step.plan.sequences, (Seqs{decode(1, 0, context)}));
    EXPECT_TRUE(step.plan.admitted.empty());
  }
  EXPECT_EQ(s.free_blocks(0), 4);
}

TEST(Scheduler, RecomputeReprefillsPromptAndGeneratedTokens) {
  Scheduler s(one_rank(512, 4, 4));
  s.add(req(1, 8, 5));
  s.add(req(2, 8, 2));
  for (int i = 0; i < 5; ++i) run_step(s);  // A finishes at step 5
  Step s6 = run_step(s);
  EXPECT_EQ(s6.plan.admitted, Ids{2});
  EXPECT_EQ(s6.plan.sequences, (Seqs{prefill(2, 0, 9, 0, true)}));
  EXPECT_TRUE(s6.outcome.first_token.empty());  // its first token came at step 1
  EXPECT_EQ(s6.outcome.finished, Ids{2});
  EXPECT_EQ(s.preemptions(2), 1);
  EXPECT_TRUE(s.idle());
}

TEST(Scheduler, TheNewestSequencePreemptsItself) {
  // Blocks of 4, 4 blocks. A (7 + 2) decodes within its 2 blocks; B (8 + 3), the newest, needs a
  // third block with none free and is its own victim. No admission in that step; B re-prefills
  // 8 + 1 = 9 tokens after A finishes.
  Scheduler s(one_rank(512, 4, 4));
  s.add(req(1, 7, 2));
  s.add(req(2, 8, 3));
  run_step(s);
  Step s2 = run_step(s);
  EXPECT_EQ(s2.plan.sequences, (Seqs{decode(1, 0, 7)}));
  EXPECT_EQ(s2.plan.preempted, Ids{2});
  EXPECT_TRUE(s2.plan.admitted.empty());
  EXPECT_EQ(s2.outcome.finished, Ids{1});
  Step s3 = run_step(s);
  EXPECT_EQ(s3.plan.sequences, (Seqs{prefill(2, 0, 9, 0, true)}));
  EXPECT_EQ(s.generated_tokens(2), 2);
  Step s4 = run_step(s);
  EXPECT_EQ(s4.plan.sequences, (Seqs{decode(2, 0, 9)}));
  EXPECT_EQ(s4.outcome.finished, Ids{2});
}

TEST(Scheduler, MaxSeqsCapsSequencesInFlight) {
  SchedulerConfig c = one_rank(512, 64, 100);
  c.max_seqs = 2;
  Scheduler s(c);
  s.add(req(1, 10, 1));
  s.add(req(2, 10, 2));
  s.add(req(3, 10, 1));
  Step s1 = run_step(s);
  EXPECT_EQ(s1.plan.admitted, (Ids{1, 2}));
  EXPECT_EQ(s1.outcome.finished, Ids{1});
  Step s2 = run_step(s);  // 1 finished: 3 is admitted beside 2's decode
  EXPECT_EQ(s2.plan.sequences, (Seqs{prefill(3, 0, 10, 0, true), decode(2, 0, 10)}));
}

TEST(Scheduler, MaxStepTokensAndRankChoice) {
  // Two ranks of budget 100, step cap 150. Request 1 goes to rank 0 (equal room, lowest index)
  // with 100 tokens; request 2 to rank 1 (rank 0's budget is spent) with the 50 left of the cap;
  // then the step is out of tokens and request 3 waits.
  SchedulerConfig c = one_rank(100, 64, 100);
  c.num_ranks = 2;
  c.max_step_tokens = 150;
  Scheduler s(c);
  s.add(req(1, 300, 1));
  s.add(req(2, 300, 1));
  s.add(req(3, 10, 1));
  Step s1 = run_step(s);
  EXPECT_EQ(s1.plan.sequences, (Seqs{prefill(1, 0, 100, 0, false), prefill(2, 1, 50, 0, false)}));
  EXPECT_EQ(s1.plan.admitted, (Ids{1, 2}));
  Step s2 = run_step(s);  // continuing prefills in admission order take the whole cap
  EXPECT_EQ(s2.plan.sequences,
            (Seqs{prefill(1, 0, 100, 100, false), prefill(2, 1, 50, 50, false)}));
}

TEST(Scheduler, RankWithTheMostRoomWins) {
  // Rank 0 holds a 640-token sequence, 11 blocks once it decodes: room 89 - 4 = 85 against
  // rank 1's 100.
  SchedulerConfig c = one_rank(2048, 64, 100);
  c.num_ranks = 2;
  Scheduler s(c);
  s.add(req(1, 640, 5));
  run_step(s);
  s.add(req(2, 64, 5));
  s.add(req(3, 64, 5));
  Step s2 = run_step(s);
  // 2 goes to rank 1 (room 100 > 85); then rank 1 has 99 - 4 = 95 > 85: 3 goes there too.
  EXPECT_EQ(s2.plan.sequences,
            (Seqs{decode(1, 0, 640), prefill(2, 1, 64, 0, true), prefill(3, 1, 64, 0, true)}));
}

TEST(Scheduler, HeadOfLineStopsTheQueue) {
  // 10 blocks of 64: request 1 takes 8; request 2 needs 4 and waits; request 3 (1 block) would
  // fit but may not pass it.
  Scheduler s(one_rank(2048, 64, 10));
  s.add(req(1, 500, 3));
  s.add(req(2, 200, 1));
  s.add(req(3, 50, 1));
  Step s1 = run_step(s);
  EXPECT_EQ(s1.plan.admitted, Ids{1});
  Step s2 = run_step(s);
  EXPECT_TRUE(s2.plan.admitted.empty());
  EXPECT_EQ(s.num_queued(), 2);
  run_step(s);  // 1 finishes
  Step s4 = run_step(s);
  EXPECT_EQ(s4.plan.admitted, (Ids{2, 3}));
}

TEST(Scheduler, WithoutChunkedPrefillAPromptRunsWholeOrWaits) {
  SchedulerConfig c = one_rank(100, 64, 100);
  c.chunked_prefill = false;
  Scheduler s(c);
  EXPECT_EQ(s.add(req(9, 101, 1)), AddResult::kRejectedPromptOverBudget);
  s.add(req(1, 50, 3));
  run_step(s);
  s.add(req(2, 100, 1));
  Step s2 = run_step(s);  // 99 tokens left after 1's decode: 2 waits whole
  EXPECT_EQ(s2.plan.sequences, (Seqs{decode(1, 0, 50)}));
  run_step(s);  // 1 finishes
  Step s4 = run_step(s);
  EXPECT_EQ(s4.plan.sequences, (Seqs{prefill(2, 0, 100, 0, true)}));
}

TEST(Scheduler, RejectionsAtArrival) {
  SchedulerConfig c = one_rank(512, 64, 10);
  c.max_context_tokens = 1000;
  c.max_queued_requests = 1;
  Scheduler s(c);
  EXPECT_EQ(s.add(req(1, 900, 101)), AddResult::kRejectedContextTooLong);
  EXPECT_EQ(s.add(req(2, 600, 41)), AddResult::kRejectedKvCapacity);  // 641 tokens: 11 blocks
  EXPECT_EQ(s.add(req(3, 600, 40)), AddResult::kQueued);              // 640: exactly 10
  EXPECT_EQ(s.add(req(4, 10, 1)), AddResult::kRejectedQueueFull);
  EXPECT_STREQ(reject_reason_name(AddResult::kRejectedKvCapacity), "kv_capacity");
  EXPECT_EQ(s.outstanding(), 1);
  EXPECT_THROW(s.add(req(3, 10, 1)), std::invalid_argument);
  EXPECT_THROW(s.add(req(5, 0, 1)), std::invalid_argument);
}

TEST(Scheduler, RefusesBadConfigsAndForeignPlans) {
  SchedulerConfig c = one_rank(512, 64, 0);
  EXPECT_THROW(Scheduler{c}, std::invalid_argument);
  Scheduler s(one_rank(512, 64, 10));
  s.add(req(1, 10, 2));
  StepPlan plan = s.plan_step();
  EXPECT_THROW(s.plan_step(), std::logic_error);
  StepPlan other = plan;
  other.sequences[0].new_tokens = 5;
  EXPECT_THROW(s.finish_step(other), std::logic_error);
  s.finish_step(plan);
}

}  // namespace
}  // namespace moesim::engine::serve

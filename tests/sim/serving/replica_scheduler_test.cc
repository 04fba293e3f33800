// The replica scheduler on its own, built from structs: batch order (decode, prefill chunks,
// admissions), token budgets, head-of-line admission, concurrency limits, rank choice by prefix
// hits and room, prefix caching across requests, and preemption by recompute.
#include "sim/serving/replica_scheduler.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/sim/serving/scheduler_test_seqs.h"

namespace moesim::sim {
namespace {

SchedulerSpec spec(int64_t budget_per_rank = 64) {
  SchedulerSpec s;
  s.max_seqs = 16;
  s.max_batch_tokens_per_gpu = budget_per_rank;
  s.kv_block_tokens = 64;
  s.prefix_caching = true;
  return s;
}

GpuMemoryLayout layout(int64_t num_blocks) {
  GpuMemoryLayout l;
  l.num_kv_blocks = num_blocks;
  l.kv_block_bytes = 1024;
  return l;
}

using testing::seq;
using testing::table;

// What the cluster does when a step ends: prefill progress, one token per finished slice.
void finish_step(ReplicaScheduler& sched, IdWindow<Seq>& seqs) {
  for (const auto& [sid, sl] : sched.batch().seqs) {
    Seq& s = seqs[sid];
    if (!s.running) continue;
    if (sl.prefill) {
      s.prefilled += sl.new_tokens;
      if (s.prefilled < s.prefill_target) continue;
      sched.finish_prefill(s, 0);
    }
    s.generated += 1;
  }
}

TEST(ReplicaScheduler, ChunksPrefillWithinTheRankBudget) {
  IdWindow<Seq> seqs = table({seq(100, 4)});
  ReplicaScheduler sched(spec(64), 1, layout(100), &seqs);
  sched.enqueue(0);
  const ScheduledBatch& b1 = sched.schedule(7);
  ASSERT_EQ(b1.seqs.size(), 1u);
  EXPECT_TRUE(b1.seqs[0].second.prefill);
  EXPECT_EQ(b1.seqs[0].second.new_tokens, 64);
  EXPECT_EQ(b1.seqs[0].second.context_tokens, 0);
  EXPECT_EQ(seqs[0].first_scheduled_ns, 7);
  EXPECT_EQ(sched.num_in_flight(), 1);
  finish_step(sched, seqs);
  const ScheduledBatch& b2 = sched.schedule(8);
  ASSERT_EQ(b2.seqs.size(), 1u);
  EXPECT_EQ(b2.seqs[0].second.new_tokens, 36);
  EXPECT_EQ(b2.seqs[0].second.context_tokens, 64);
  finish_step(sched, seqs);
  EXPECT_EQ(seqs[0].generated, 1);  // the prefill's last chunk emits the first token
  // Now decoding: one token at context prompt + generated - 1.
  const ScheduledBatch& b3 = sched.schedule(9);
  ASSERT_EQ(b3.seqs.size(), 1u);
  EXPECT_FALSE(b3.seqs[0].second.prefill);
  EXPECT_EQ(b3.seqs[0].second.new_tokens, 1);
  EXPECT_EQ(b3.seqs[0].second.context_tokens, 100);
  EXPECT_EQ(seqs[0].first_scheduled_ns, 7);
}

TEST(ReplicaScheduler, DecodeComesBeforePrefillAndAdmissionsInTheBatch) {
  IdWindow<Seq> seqs = table({seq(10, 8, 100), seq(10, 8, 200), seq(200, 8, 300)});
  ReplicaScheduler sched(spec(64), 1, layout(100), &seqs);
  sched.enqueue(0);
  sched.enqueue(1);
  sched.schedule(0);  // both prefills fit: 10 + 10 tokens
  ASSERT_EQ(sched.batch().seqs.size(), 2u);
  finish_step(sched, seqs);
  sched.enqueue(2);
  const ScheduledBatch& b = sched.schedule(1);
  ASSERT_EQ(b.seqs.size(), 3u);
  EXPECT_EQ(b.seqs[0].first, 0);
  EXPECT_FALSE(b.seqs[0].second.prefill);
  EXPECT_EQ(b.seqs[1].first, 1);
  EXPECT_FALSE(b.seqs[1].second.prefill);
  // The admission gets what the two decode tokens left of the budget.
  EXPECT_EQ(b.seqs[2].first, 2);
  EXPECT_TRUE(b.seqs[2].second.prefill);
  EXPECT_EQ(b.seqs[2].second.new_tokens, 62);
  EXPECT_EQ(b.num_tokens(), 64);
  ASSERT_EQ(b.ranks.size(), 1u);
  EXPECT_EQ(b.ranks[0].size(), 3u);
}

TEST(ReplicaScheduler, AdmissionIsHeadOfLineAndCappedByMaxSeqs) {
  // Rank of 4 blocks (256 tokens): the 300-token request can never fit and blocks the queue.
  IdWindow<Seq> seqs = table({seq(300, 2, 100), seq(10, 2, 200)});
  ReplicaScheduler sched(spec(512), 1, layout(4), &seqs);
  sched.enqueue(0);
  sched.enqueue(1);
  EXPECT_TRUE(sched.schedule(0).empty());
  EXPECT_EQ(sched.num_waiting(), 2u);

  IdWindow<Seq> more = table({seq(10, 2, 100), seq(10, 2, 200), seq(10, 2, 300)});
  ReplicaScheduler capped(spec(512), 1, layout(100), &more);
  capped.set_limits(2, 0);
  for (int32_t i = 0; i < 3; ++i) capped.enqueue(i);
  EXPECT_EQ(capped.schedule(0).seqs.size(), 2u);
  EXPECT_EQ(capped.num_in_flight(), 2);
  EXPECT_EQ(capped.num_waiting(), 1u);
}

TEST(ReplicaScheduler, StepTokenCapSpansRanks) {
  IdWindow<Seq> seqs = table({seq(50, 2, 100), seq(50, 2, 200)});
  ReplicaScheduler sched(spec(64), 2, layout(100), &seqs);
  sched.set_limits(0, 60);
  sched.enqueue(0);
  sched.enqueue(1);
  const ScheduledBatch& b = sched.schedule(0);
  ASSERT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(b.seqs[0].second.new_tokens, 50);
  EXPECT_EQ(b.seqs[1].second.new_tokens, 10);  // what the 60-token cap leaves
  EXPECT_EQ(b.num_tokens(), 60);
  // Equal hits (none) and the first rank has less room after the first admission: the second
  // request goes to the other rank.
  EXPECT_NE(seqs[0].rank, seqs[1].rank);
}

TEST(ReplicaScheduler, PrefixHitsPickTheRankAndSkipCachedTokens) {
  // Two 1,100-token prompts sharing their first two 512-token blocks.
  IdWindow<Seq> seqs = table({seq(1100, 1, 100), seq(1100, 1, 100)});
  seqs[1].req.prefix_block_hashes[2] = 999;  // the third (partial) block differs
  ReplicaScheduler sched(spec(2048), 2, layout(200), &seqs);
  sched.enqueue(0);
  sched.schedule(0);
  finish_step(sched, seqs);  // prefill done: its two full blocks enter rank 0's cache
  const int32_t rank0 = seqs[0].rank;
  sched.release(seqs[0]);
  sched.enqueue(1);
  const ScheduledBatch& b = sched.schedule(1);
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(seqs[1].rank, rank0);  // the rank holding the prefix, though the other has more room
  EXPECT_EQ(seqs[1].cached_prompt_tokens, 1024);
  EXPECT_EQ(b.seqs[0].second.context_tokens, 1024);
  EXPECT_EQ(b.seqs[0].second.new_tokens, 1100 - 1024);
  EXPECT_EQ(sched.totals().prompt_tokens_total, 2200);
  EXPECT_EQ(sched.totals().prompt_tokens_cached, 1024);
}

TEST(ReplicaScheduler, RunningOutOfBlocksPreemptsTheLatestAdmitted) {
  // 2 blocks of 64 tokens: two 64-token prompts fill them; the first decode token of each needs a
  // new block, so the most recently admitted sequence is preempted and re-queued at the front.
  SchedulerSpec s = spec(512);
  s.prefix_caching = false;
  IdWindow<Seq> seqs = table({seq(64, 4, 100), seq(64, 4, 200)});
  ReplicaScheduler sched(s, 1, layout(2), &seqs);
  sched.enqueue(0);
  sched.enqueue(1);
  ASSERT_EQ(sched.schedule(0).seqs.size(), 2u);
  finish_step(sched, seqs);
  const ScheduledBatch& b = sched.schedule(1);
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].first, 0);
  EXPECT_FALSE(seqs[1].running);
  EXPECT_EQ(seqs[1].num_preemptions, 1);
  EXPECT_EQ(seqs[1].prefilled, 0);
  EXPECT_EQ(seqs[1].prefill_target, 64 + 1);  // prompt + generated token, recomputed
  EXPECT_EQ(sched.totals().num_preemptions, 1);
  EXPECT_EQ(sched.num_waiting(), 1u);
  EXPECT_EQ(sched.kv(0).free_blocks(), 0);
}

TEST(ReplicaScheduler, ReleaseReturnsEveryBlock) {
  IdWindow<Seq> seqs = table({seq(300, 3, 100)});
  ReplicaScheduler sched(spec(512), 1, layout(50), &seqs);
  sched.enqueue(0);
  sched.schedule(0);
  EXPECT_LT(sched.kv(0).free_blocks(), 50);
  sched.release(seqs[0]);
  EXPECT_EQ(sched.kv(0).free_blocks() + sched.kv(0).evictable_blocks(), 50);
  EXPECT_EQ(sched.num_in_flight(), 0);
  EXPECT_FALSE(seqs[0].running);
}

}  // namespace
}  // namespace moesim::sim

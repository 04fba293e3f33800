// The replica scheduler with KV tiers below HBM: a first admission whose prefix sits in the
// node's DRAM takes it into HBM, waits for the load (hand-computed from the host link) before
// its prefill, counts the hits per tier; entries the HBM cache evicts are demoted to DRAM.
#include <gtest/gtest.h>

#include <vector>

#include "sim/memory/kv_tiers.h"
#include "sim/serving/replica_scheduler.h"
#include "tests/sim/serving/scheduler_test_seqs.h"

namespace moesim::sim {
namespace {

SchedulerSpec spec() {
  SchedulerSpec s;
  s.max_seqs = 16;
  s.max_batch_tokens_per_gpu = 4096;
  s.kv_block_tokens = 64;  // 8 blocks per 512-token prefix entry
  s.prefix_caching = true;
  return s;
}

GpuMemoryLayout layout(int64_t num_blocks) {
  GpuMemoryLayout l;
  l.num_kv_blocks = num_blocks;
  l.kv_block_bytes = 1024;  // a prefix entry: 8 x 1024 = 8192 bytes
  return l;
}

KvTierSpec dram_only() {
  KvTierSpec s;
  s.enabled = true;
  s.dram_bytes_per_node = 1 << 20;
  s.pcie_bytes_per_s = 8.192e9;  // 8192 bytes per microsecond
  s.pcie_latency_ns = 500;
  return s;
}

using testing::seq;
using testing::table;

TEST(ReplicaSchedulerTiers, PrefixInDramIsLoadedBeforeItsPrefill) {
  IdWindow<Seq> seqs = table({seq(1200, 4, 1000)});
  KvTiers tiers(dram_only(), 1, 1);
  tiers.demote_from_hbm(0, 0, 1000, 8192, 1, 0);
  tiers.demote_from_hbm(0, 0, 1001, 8192, 1, 0);
  ReplicaScheduler sched(spec(), 1, layout(100), &seqs);
  sched.set_kv_tiers(&tiers, {0}, {0}, 1);
  EXPECT_EQ(sched.cached_prefix_blocks(seqs[0].req), 2);  // (1200 - 1) / 512 = 2 may hit
  sched.enqueue(0);
  EXPECT_EQ(sched.pending_prefill_tokens(), 1200);
  // Admitted at t = 100; both entries cross the host link: 100 + 2 x 1000 + 500.
  EXPECT_TRUE(sched.schedule(100).empty());
  ASSERT_EQ(sched.loads_started().size(), 1u);
  EXPECT_EQ(sched.loads_started()[0].ready_ns, 2600);
  const Seq& s = seqs[0];
  EXPECT_EQ(s.first_scheduled_ns, 100);
  EXPECT_EQ(s.kv_load_ns, 2500);
  EXPECT_EQ(s.prefilled, 1024);
  EXPECT_EQ(s.cached_prompt_tokens, 1024);
  EXPECT_EQ(s.loaded_prompt_tokens, 1024);
  EXPECT_EQ(sched.pending_prefill_tokens(), 176);
  EXPECT_TRUE(sched.kv(0).contains(1000));
  EXPECT_FALSE(tiers.dram(0).contains(1000));  // moved, not copied
  EXPECT_TRUE(sched.schedule(2599).empty());
  const ScheduledBatch& b = sched.schedule(2600);
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_TRUE(b.seqs[0].second.prefill);
  EXPECT_EQ(b.seqs[0].second.new_tokens, 176);
  EXPECT_EQ(b.seqs[0].second.context_tokens, 1024);
  EXPECT_EQ(tiers.counters().lookup_blocks, 2);
  EXPECT_EQ(tiers.counters().hit_blocks[0], 0);
  EXPECT_EQ(tiers.counters().hit_blocks[1], 2);
}

TEST(ReplicaSchedulerTiers, HbmHitsComeFirstAndEvictionsAreDemoted) {
  // 30 blocks of HBM. Sequence 0 (1100 tokens: 2 full prefix blocks + 76) finishes its prefill
  // and releases: its two entries stay cached, unpinned (16 blocks).
  IdWindow<Seq> seqs = table({seq(1100, 1, 1000), seq(1600, 1, 5000)});
  KvTiers tiers(dram_only(), 1, 1);
  ReplicaScheduler sched(spec(), 1, layout(30), &seqs);
  sched.set_kv_tiers(&tiers, {0}, {0}, 1);
  sched.enqueue(0);
  ASSERT_EQ(sched.schedule(0).seqs.size(), 1u);
  seqs[0].prefilled = 1100;
  sched.finish_prefill(seqs[0], 0);
  sched.release(seqs[0]);
  EXPECT_EQ(sched.kv(0).cached_blocks(), 16);
  // Sequence 1 needs 25 blocks (1600 tokens) and 14 are free, so both
  // cached entries are evicted (LRU) and demoted to DRAM.
  sched.enqueue(1);
  ASSERT_EQ(sched.schedule(10).seqs.size(), 1u);
  EXPECT_FALSE(sched.kv(0).contains(1000));
  EXPECT_TRUE(tiers.dram(0).contains(1000));
  EXPECT_TRUE(tiers.dram(0).contains(1001));
  EXPECT_EQ(tiers.counters().bytes_out[0], 2 * 8192);
  // A request with the first prefix now finds it in DRAM.
  Request again = seqs[0].req;
  EXPECT_EQ(sched.cached_prefix_blocks(again), 2);
}

}  // namespace
}  // namespace moesim::sim

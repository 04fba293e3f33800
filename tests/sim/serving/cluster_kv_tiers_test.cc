// The tiered KV cache through a whole run (the shipped tiered Mooncake scenario, 180 simulated
// seconds, 4 GB of DRAM per node): the per-request figures add up to the tier counters, every load
// ends before its request's first token, and the TTFT split is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "sim/policy/policy_registry.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim {
namespace {

TEST(ClusterKvTiers, RequestFiguresAddUpToTheTierCounters) {
  Scenario sc = load_scenario(std::string(MOESIM_SOURCE_DIR) +
                              "/scenarios/deepseek-v3-h800-mooncake-tiered.toml");
  sc.run.duration_s = 180;
  sc.kv_tiers.dram_bytes_per_node = 4'000'000'000;  // small: DRAM evicts to SSD within 180 s
  sc.kv_tiers.write_through = false;                // the exclusive hierarchy
  RunOptions opt;
  opt.keep_requests = true;
  const RunOutput out = run_scenario(sc, opt, 1, make_policies(sc));
  ASSERT_TRUE(out.conservation_ok) << out.conservation_message;
  const KvTierCounters& k = out.counters.kv_tiers;
  ASSERT_TRUE(k.enabled);
  int64_t cached = 0, loaded = 0, loads = 0;
  for (const RequestRecord& r : out.requests) {
    cached += r.cached_prompt_tokens;
    loaded += r.loaded_prompt_tokens;
    if (r.loaded_prompt_tokens > 0) ++loads;
    EXPECT_LE(r.loaded_prompt_tokens, r.cached_prompt_tokens);
    EXPECT_GE(r.kv_load_ns, 0);
    if (r.first_token_ns < 0) continue;
    // The load is part of TTFT: the first token comes after it.
    EXPECT_GE(r.first_token_ns, r.first_scheduled_ns + r.kv_load_ns) << r.request_id;
    EXPECT_EQ(r.queueing_ns() + r.kv_load_ns + r.prefill_ns(), r.ttft_ns());
  }
  // A load takes at least its bytes over the host path (50 GB/s; a remote read is no faster):
  // the all-to-all only ever delays it (host-link contention).
  const double entry_bytes_per_gpu = std::llround(
      out.gpus.front().kv_block_bytes * (kPrefixBlockTokens / sc.scheduler.kv_block_tokens));
  for (const RequestRecord& r : out.requests) {
    const double bytes =
        entry_bytes_per_gpu * static_cast<double>(r.loaded_prompt_tokens) / kPrefixBlockTokens;
    EXPECT_GE(static_cast<double>(r.kv_load_ns), bytes / 50e9 * 1e9 - 1.0) << r.request_id;
  }
  // The copies shared the GPUs' PCIe links with the expert-parallel all-to-all (two nodes per
  // replica): steps were slowed, demotions delayed.
  EXPECT_GT(k.slowed_gpu_steps, 0);
  EXPECT_GT(k.demotion_contention_s, 0);
  EXPECT_GE(k.load_contention_s, 0);
  // Every cached prompt token is a hit block of some tier; loaded ones are DRAM / SSD hits.
  const int64_t hits = k.hit_blocks[0] + k.hit_blocks[1] + k.hit_blocks[2];
  EXPECT_EQ(cached, hits * kPrefixBlockTokens);
  EXPECT_EQ(loaded, (k.hit_blocks[1] + k.hit_blocks[2]) * kPrefixBlockTokens);
  EXPECT_EQ(loads, k.num_loads);
  EXPECT_EQ(out.counters.prompt_tokens_cached, cached);
  EXPECT_GT(k.num_loads, 0);
  EXPECT_LE(hits, k.lookup_blocks);
  // Bytes per tier: what went in minus what went out is what the tier holds at the end; HBM
  // took in exactly the loaded hit blocks. An entry: 512 tokens on one GPU (data-parallel
  // attention: one GPU per rank).
  const double entry_bytes = static_cast<double>(std::llround(
      out.gpus.front().kv_block_bytes * (kPrefixBlockTokens / sc.scheduler.kv_block_tokens)));
  EXPECT_EQ(k.bytes_in[0], static_cast<double>(k.hit_blocks[1] + k.hit_blocks[2]) * entry_bytes);
  for (int t = 1; t < kNumKvTiers; ++t) {
    EXPECT_EQ(k.bytes_in[t] - k.bytes_out[t],
              static_cast<double>(k.entries_at_end[t]) * entry_bytes)
        << kKvTierNames[t];
  }
  // Demoted out of HBM: stored in DRAM or dropped as a copy the pool already held; what left
  // DRAM went to SSD or was loaded; what left SSD was loaded or dropped.
  const double dram_loads = static_cast<double>(k.hit_blocks[1]) * entry_bytes;
  const double ssd_loads = static_cast<double>(k.hit_blocks[2]) * entry_bytes;
  EXPECT_EQ(k.bytes_out[1], k.bytes_in[2] + dram_loads);
  EXPECT_EQ(k.bytes_out[0] + (k.bytes_out[2] - ssd_loads), k.bytes_in[1] + k.dropped_bytes);
  EXPECT_GT(k.bytes_in[2], 0);  // the SSD tier was used
}

// With write-through (the shipped scenario's Mooncake store) the tiers hold copies: what HBM
// demotes or writes through enters DRAM, what DRAM evicts enters SSD, what SSD evicts is gone;
// loads copy and move nothing out, so each tier's bytes in minus out is what it holds at the end.
// The prefixes a replica computed reach every other replica: more lower-tier hits than without.
TEST(ClusterKvTiers, WriteThroughKeepsCopiesInTheStore) {
  Scenario sc = load_scenario(std::string(MOESIM_SOURCE_DIR) +
                              "/scenarios/deepseek-v3-h800-mooncake-tiered.toml");
  ASSERT_TRUE(sc.kv_tiers.write_through);
  sc.run.duration_s = 120;
  RunOutput with = run_scenario(sc, RunOptions{}, 1, make_policies(sc));
  sc.kv_tiers.write_through = false;
  const RunOutput without = run_scenario(sc, RunOptions{}, 1, make_policies(sc));
  ASSERT_TRUE(with.conservation_ok) << with.conservation_message;
  const KvTierCounters& k = with.counters.kv_tiers;
  const double entry_bytes = static_cast<double>(std::llround(
      with.gpus.front().kv_block_bytes * (kPrefixBlockTokens / sc.scheduler.kv_block_tokens)));
  EXPECT_GT(k.written_through_bytes, 0);
  EXPECT_EQ(k.bytes_in[0], static_cast<double>(k.hit_blocks[1] + k.hit_blocks[2]) * entry_bytes);
  for (int t = 1; t < kNumKvTiers; ++t) {
    EXPECT_EQ(k.bytes_in[t] - k.bytes_out[t],
              static_cast<double>(k.entries_at_end[t]) * entry_bytes)
        << kKvTierNames[t];
  }
  EXPECT_EQ(k.bytes_in[1], k.bytes_out[0] + k.written_through_bytes);
  EXPECT_EQ(k.bytes_in[2], k.bytes_out[1]);
  EXPECT_EQ(k.dropped_bytes, k.bytes_out[2]);
  EXPECT_EQ(k.pcie_bytes,
            k.bytes_out[0] + k.written_through_bytes + k.bytes_in[0] - k.network_bytes);
  const KvTierCounters& x = without.counters.kv_tiers;
  EXPECT_GT(k.hit_blocks[1] + k.hit_blocks[2], 2 * (x.hit_blocks[1] + x.hit_blocks[2]));
  EXPECT_GT(with.counters.prompt_tokens_cached, without.counters.prompt_tokens_cached);
}

}  // namespace
}  // namespace moesim::sim

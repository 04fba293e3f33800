// The lower KV tiers against hand-computed cases: LRU eviction order of one tier, demotion down
// the tiers (HBM -> DRAM -> SSD -> dropped) with the bytes moved, conservation of prefix entries
// across an HBM cache and its node's tiers, and load timing over the host and NVMe links.
#include "sim/memory/kv_tiers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/memory/kv_cache.h"

namespace moesim::sim {
namespace {

using Evicted = std::vector<std::pair<uint64_t, int64_t>>;

TEST(KvTierStore, EvictsLeastRecentlyUsedFirst) {
  KvTierStore st(300);
  Evicted ev;
  ASSERT_TRUE(st.insert(1, 100, &ev));
  ASSERT_TRUE(st.insert(2, 100, &ev));
  ASSERT_TRUE(st.insert(3, 100, &ev));
  EXPECT_TRUE(ev.empty());
  st.touch(1);  // order now 2, 3, 1
  ASSERT_TRUE(st.insert(4, 100, &ev));
  EXPECT_EQ(ev, (Evicted{{2, 100}}));
  ev.clear();
  ASSERT_TRUE(st.insert(5, 250, &ev));  // needs 250 of 300: 3, 1 and 4 go, oldest first
  EXPECT_EQ(ev, (Evicted{{3, 100}, {1, 100}, {4, 100}}));
  EXPECT_EQ(st.used_bytes(), 250);
  ev.clear();
  EXPECT_FALSE(st.insert(6, 301, &ev));  // larger than the tier: nothing changes
  EXPECT_TRUE(ev.empty());
  EXPECT_TRUE(st.contains(5));
  EXPECT_EQ(st.take(5), 250);
  EXPECT_EQ(st.take(5), 0);
  EXPECT_EQ(st.used_bytes(), 0);
}

KvTierSpec two_tiers(int64_t dram_bytes, int64_t ssd_bytes) {
  KvTierSpec s;
  s.enabled = true;
  s.dram_bytes_per_node = dram_bytes;
  s.ssd_bytes_per_node = ssd_bytes;
  s.pcie_bytes_per_s = 50e9;
  s.pcie_latency_ns = 10'000;
  s.nvme_bytes_per_s = 40e9;
  s.nvme_latency_ns = 100'000;
  return s;
}

TEST(KvTiers, DemotionCascadesDramToSsdToDropped) {
  // Entries of 100 bytes; DRAM and SSD hold two each.
  KvTiers tiers(two_tiers(200, 200), 1, 8);
  for (uint64_t k = 1; k <= 5; ++k) tiers.demote_from_hbm(0, k, 100, 1);
  // DRAM keeps the two latest (4, 5); 1, 2, 3 went to SSD in that order, which dropped 1.
  EXPECT_EQ(tiers.tier_of(0, 5), 1);
  EXPECT_EQ(tiers.tier_of(0, 4), 1);
  EXPECT_EQ(tiers.tier_of(0, 3), 2);
  EXPECT_EQ(tiers.tier_of(0, 2), 2);
  EXPECT_EQ(tiers.tier_of(0, 1), 0);
  const KvTierCounters& c = tiers.counters();
  EXPECT_EQ(c.bytes_out[0], 500);  // HBM -> DRAM
  EXPECT_EQ(c.bytes_in[1], 500);
  EXPECT_EQ(c.bytes_out[1], 300);  // DRAM -> SSD: 1, 2, 3
  EXPECT_EQ(c.bytes_in[2], 300);
  EXPECT_EQ(c.bytes_out[2], 100);  // SSD -> gone: 1
  EXPECT_EQ(c.dropped_bytes, 100);
  EXPECT_EQ(c.dropped_entries, 1);
  EXPECT_EQ(c.pcie_bytes, 500);
  EXPECT_EQ(c.nvme_bytes, 300);
  // A copy of a prefix the node already holds below HBM is dropped; the held one is refreshed.
  tiers.demote_from_hbm(0, 4, 100, 1);
  EXPECT_EQ(c.dropped_entries, 2);
  tiers.demote_from_hbm(0, 6, 100, 1);  // DRAM's oldest is now 5, not 4
  EXPECT_EQ(tiers.tier_of(0, 4), 1);
  EXPECT_EQ(tiers.tier_of(0, 5), 2);
  // The nodes' tiers are separate.
  EXPECT_EQ(tiers.match(0, std::vector<uint64_t>{6, 4, 5, 3, 9}), 4);
}

TEST(KvTiers, MissingDramTierDemotesStraightToSsd) {
  KvTiers tiers(two_tiers(0, 200), 1, 1);
  tiers.demote_from_hbm(0, 7, 100, 1);
  EXPECT_EQ(tiers.tier_of(0, 7), 2);
  EXPECT_EQ(tiers.counters().bytes_in[1], 0);
  EXPECT_EQ(tiers.counters().bytes_in[2], 100);
}

TEST(KvTiers, EveryPrefixEntryIsInExactlyOnePlace) {
  // An HBM cache of 4 one-block entries feeding a DRAM tier of 3 and an SSD tier of 2 entries:
  // after a stream of inserts every key ever cached is in HBM, DRAM or SSD, or was dropped,
  // exactly once.
  KvCache hbm(4, 512);
  KvTiers tiers(two_tiers(300, 200), 1, 1);
  hbm.set_eviction_sink([&](uint64_t key, int64_t blocks, int64_t tokens) {
    EXPECT_EQ(blocks, 1);
    EXPECT_EQ(tokens, 512);
    tiers.demote_from_hbm(0, key, 100, 1);
  });
  uint64_t tick = 0;
  const int kKeys = 20;
  for (uint64_t key = 0; key < kKeys; ++key) {
    ASSERT_TRUE(hbm.allocate(1));
    hbm.insert_unpinned_merge(key, 1, 512, ++tick);
  }
  int64_t placed = 0;
  for (uint64_t key = 0; key < kKeys; ++key) {
    const int places =
        int{hbm.contains(key)} + int{tiers.dram(0).contains(key)} + int{tiers.ssd(0).contains(key)};
    EXPECT_LE(places, 1) << key;
    placed += places;
  }
  EXPECT_EQ(placed, 4 + 3 + 2);
  EXPECT_EQ(placed + tiers.counters().dropped_entries, kKeys);
  // The newest 4 stay in HBM, the next 3 in DRAM, the next 2 in SSD.
  for (uint64_t key = 16; key < 20; ++key) EXPECT_TRUE(hbm.contains(key)) << key;
  for (uint64_t key = 13; key < 16; ++key) EXPECT_TRUE(tiers.dram(0).contains(key)) << key;
  for (uint64_t key = 11; key < 13; ++key) EXPECT_TRUE(tiers.ssd(0).contains(key)) << key;
  EXPECT_EQ(hbm.free_blocks() + hbm.cached_blocks(), 4);
}

TEST(KvTiers, LoadTimeIsBytesOverTheLinkPlusLatency) {
  // 50 MB per entry: 1 ms over a 50 GB/s host link, 1.25 ms over a 40 GB/s NVMe.
  const int64_t kEntry = 50'000'000;
  KvTiers tiers(two_tiers(10 * kEntry, 10 * kEntry), 1, 8);
  for (uint64_t k = 1; k <= 3; ++k) tiers.demote_from_hbm(0, k, kEntry, 1);
  // Push key 9 to SSD: fill DRAM past its 10 entries with keys 9 (oldest), 10..19.
  tiers.demote_from_hbm(0, 9, kEntry, 1);
  for (uint64_t k = 10; k < 17; ++k) tiers.demote_from_hbm(0, k, kEntry, 1);
  ASSERT_EQ(tiers.tier_of(0, 1), 2);  // 1 was the oldest of the 11
  ASSERT_EQ(tiers.tier_of(0, 2), 1);

  // DRAM hit at t = 1000 on GPU 0: 1000 + 1,000,000 + 10,000.
  const uint64_t k2[] = {2};
  const KvLoad a = tiers.load(0, 0, k2, kEntry, 1, 1000);
  EXPECT_EQ(a.dram_entries, 1);
  EXPECT_EQ(a.ready_ns, 1'011'000);
  // Two more DRAM hits on the same GPU at t = 2000 queue behind it on the link:
  // start 1,001,000, + 2 ms, + latency.
  const uint64_t k3[] = {3, 9};
  ASSERT_EQ(tiers.tier_of(0, 9), 1);
  const KvLoad b = tiers.load(0, 0, k3, kEntry, 1, 2000);
  EXPECT_EQ(b.ready_ns, 3'011'000);
  // An SSD hit on GPU 1 at t = 0: NVMe 1,250,000 + 100,000, then the host link 1,000,000 +
  // 10,000.
  const uint64_t k1[] = {1};
  const KvLoad c = tiers.load(0, 1, k1, kEntry, 1, 0);
  EXPECT_EQ(c.ssd_entries, 1);
  EXPECT_EQ(c.ready_ns, 2'360'000);
  EXPECT_EQ(tiers.tier_of(0, 1), 0);  // taken out: exclusive tiers
  const KvTierCounters& n = tiers.counters();
  EXPECT_EQ(n.hit_blocks[1], 3);
  EXPECT_EQ(n.hit_blocks[2], 1);
  EXPECT_EQ(n.bytes_in[0], 4.0 * kEntry);
  EXPECT_EQ(n.num_loads, 3);
}

TEST(KvTiers, ClusterScopePoolsTheNodesAndLoadsRemoteEntriesOverTheNic) {
  const int64_t kEntry = 50'000'000;  // 1 ms over the host link, 2 ms over a 25 GB/s NIC
  KvTierSpec spec = two_tiers(10 * kEntry, 10 * kEntry);
  spec.cluster_scope = true;
  spec.nic_bytes_per_s = 25e9;
  spec.nic_latency_ns = 5'000;
  KvTiers tiers(spec, 2, 16);
  EXPECT_EQ(tiers.dram(0).capacity_bytes(), 20 * kEntry);  // one pool: per node x nodes
  EXPECT_EQ(&tiers.dram(0), &tiers.dram(1));
  tiers.demote_from_hbm(1, 1, kEntry, 1);  // home node 1
  tiers.demote_from_hbm(0, 2, kEntry, 1);  // home node 0
  tiers.demote_from_hbm(1, 2, kEntry, 1);  // the pool already holds 2: this copy is dropped
  EXPECT_EQ(tiers.counters().dropped_entries, 1);
  EXPECT_EQ(tiers.match(0, std::vector<uint64_t>{2, 1}), 2);  // node 0 sees node 1's entry
  // On GPU 0 of node 0 at t = 0: key 2 over the host link (1,000,000 + 10,000), key 1 from node
  // 1's DRAM over the NIC (2,000,000 + 5,000), in parallel: ready at the later.
  const uint64_t keys[] = {2, 1};
  const KvLoad l = tiers.load(0, 0, keys, kEntry, 1, 0);
  EXPECT_EQ(l.dram_entries, 2);
  EXPECT_EQ(l.remote_entries, 1);
  EXPECT_EQ(l.ready_ns, 2'005'000);
  const KvTierCounters& c = tiers.counters();
  EXPECT_EQ(c.remote_hit_blocks, 1);
  EXPECT_EQ(c.network_bytes, kEntry);
  EXPECT_EQ(c.pcie_bytes, 4.0 * kEntry);  // three demotions and one local load
  EXPECT_EQ(tiers.match(1, std::vector<uint64_t>{1}), 0);
}

}  // namespace
}  // namespace moesim::sim

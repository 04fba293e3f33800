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
  for (uint64_t k = 1; k <= 5; ++k) tiers.demote_from_hbm(0, 0, k, 100, 1, 0);
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
  // A copy of a prefix the node already holds below HBM moves nothing; the held one is refreshed.
  tiers.demote_from_hbm(0, 0, 4, 100, 1, 0);
  EXPECT_EQ(c.dropped_entries, 1);
  EXPECT_EQ(c.duplicate_entries, 1);
  EXPECT_EQ(c.pcie_bytes, 500);
  tiers.demote_from_hbm(0, 0, 6, 100, 1, 0);  // DRAM's oldest is now 5, not 4
  EXPECT_EQ(tiers.tier_of(0, 4), 1);
  EXPECT_EQ(tiers.tier_of(0, 5), 2);
  // The nodes' tiers are separate.
  EXPECT_EQ(tiers.match(0, std::vector<uint64_t>{6, 4, 5, 3, 9}), 4);
}

TEST(KvTiers, MissingDramTierDemotesStraightToSsd) {
  KvTiers tiers(two_tiers(0, 200), 1, 1);
  tiers.demote_from_hbm(0, 0, 7, 100, 1, 0);
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
    tiers.demote_from_hbm(0, 0, key, 100, 1, 0);
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
  for (uint64_t k = 1; k <= 3; ++k) tiers.demote_from_hbm(0, 0, k, kEntry, 1, 0);
  // Push key 9 to SSD: fill DRAM past its 10 entries with keys 9 (oldest), 10..19.
  tiers.demote_from_hbm(0, 0, 9, kEntry, 1, 0);
  for (uint64_t k = 10; k < 17; ++k) tiers.demote_from_hbm(0, 0, k, kEntry, 1, 0);
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
  tiers.demote_from_hbm(1, 0, 1, kEntry, 1, 0);  // home node 1
  tiers.demote_from_hbm(0, 0, 2, kEntry, 1, 0);  // home node 0
  tiers.demote_from_hbm(1, 0, 2, kEntry, 1, 0);  // the pool already holds 2: nothing moves
  EXPECT_EQ(tiers.counters().duplicate_entries, 1);
  EXPECT_EQ(tiers.counters().dropped_entries, 0);
  EXPECT_EQ(tiers.match(0, std::vector<uint64_t>{2, 1}), 2);  // node 0 sees node 1's entry
  // On GPU 0 of node 0 at t = 0, one after the other on the GPU's host path in: key 1 from node
  // 1's DRAM over the NIC (2,000,000, + 5,000 latency), then key 2 over the PCIe link from the
  // node's DRAM (1,000,000 more, + 10,000): ready at 3,010,000.
  const uint64_t keys[] = {2, 1};
  const KvLoad l = tiers.load(0, 0, keys, kEntry, 1, 0);
  EXPECT_EQ(l.dram_entries, 2);
  EXPECT_EQ(l.remote_entries, 1);
  EXPECT_EQ(l.ready_ns, 3'010'000);
  const KvTierCounters& c = tiers.counters();
  EXPECT_EQ(c.remote_hit_blocks, 1);
  EXPECT_EQ(c.network_bytes, kEntry);
  EXPECT_EQ(c.pcie_bytes, 3.0 * kEntry);  // two demotions and one local load
  EXPECT_EQ(tiers.match(1, std::vector<uint64_t>{1}), 0);
}

TEST(HostPathQueue, BusySharesAndDelaysAreFifo) {
  HostPathQueue q(2);
  // GPU 0: a local copy [100, 300) then a remote one queued behind it [300, 600), tail 10.
  EXPECT_EQ(q.push(0, 100, 200, 5, 7, false), 300);
  EXPECT_EQ(q.push(0, 0, 300, 10, 8, true), 600);
  EXPECT_EQ(q.free_ns(0), 600);
  EXPECT_EQ(q.free_ns(1), 0);
  double local = 0, remote = 0;
  q.busy_share(0, 200, 400, &local, &remote);  // [200, 300) local, [300, 400) remote
  EXPECT_DOUBLE_EQ(local, 0.5);
  EXPECT_DOUBLE_EQ(remote, 0.5);
  q.busy_share(1, 0, 1000, &local, &remote);
  EXPECT_EQ(local + remote, 0.0);
  // Delayed by 50 at t = 200: the copy in flight ends at 350, the queued one runs [350, 650).
  std::vector<int64_t> ids;
  q.delay(0, 200, 50, &ids);
  EXPECT_EQ(ids, (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(q.ready_ns(0, 7), 355);
  EXPECT_EQ(q.ready_ns(0, 8), 660);
  // At t = 400 the first has ended and is forgotten; a zero delay moves nothing.
  ids.clear();
  q.delay(0, 400, 0, &ids);
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(q.ready_ns(0, 7), 0);
  EXPECT_EQ(q.ready_ns(0, 8), 660);
}

TEST(KvTiers, CopiesAndTheAllToAllShareTheHostPathFairly) {
  // 50 MB entries: 1 ms over the 50 GB/s PCIe link. NIC 50 GB/s per GPU.
  const int64_t kEntry = 50'000'000;
  KvTierSpec spec = two_tiers(10 * kEntry, 0);
  spec.nic_bytes_per_s = 50e9;
  KvTiers tiers(spec, 1, 8);
  tiers.demote_from_hbm(0, 0, 1, kEntry, 1, 0);  // GPU 0 sends [0, 1 ms) out
  const uint64_t k1[] = {1};
  const KvLoad l = tiers.load(0, 1, k1, kEntry, 1, 0);  // GPU 1 receives [0, 1 ms)
  ASSERT_EQ(l.ready_ns, 1'010'000);
  // A step over [0.5 ms, 1.5 ms): half of it with the copies in flight.
  const HostPathShare in = tiers.busy_share(1, 500'000, 1'500'000);
  EXPECT_DOUBLE_EQ(in.in_local, 0.5);
  EXPECT_EQ(in.out, 0.0);
  // Beside a copy the all-to-all gets min(50, 50 / 2) = 25 GB/s of the GPU's 50: twice the time
  // per byte for half of the step: 1.5x.
  EXPECT_DOUBLE_EQ(tiers.nic_in_slowdown(in), 1.5);
  EXPECT_DOUBLE_EQ(tiers.nic_out_slowdown(in), 1.0);
  const HostPathShare out = tiers.busy_share(0, 500'000, 1'500'000);
  EXPECT_DOUBLE_EQ(tiers.nic_out_slowdown(out), 1.5);
  // The step moved 20 MB into GPU 1 over its NIC; half of it while the copy ran: the copy loses
  // 10 MB of its path, 200 us, and so does the load.
  std::vector<std::pair<int64_t, SimTime>> moved;
  tiers.contend(1, 500'000, 1'500'000, 20e6, 0, &moved);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].first, l.id);
  EXPECT_EQ(moved[0].second, 1'210'000);
  EXPECT_DOUBLE_EQ(tiers.counters().load_contention_s, 200e-6);
  // GPU 0's demotion loses 10 MB of 20 MB out, 200 us; no load waits on it.
  moved.clear();
  tiers.contend(0, 500'000, 1'500'000, 0, 20e6, &moved);
  EXPECT_TRUE(moved.empty());
  EXPECT_DOUBLE_EQ(tiers.counters().demotion_contention_s, 200e-6);
  // Without a network the all-to-all never slows.
  KvTiers no_nic(two_tiers(10 * kEntry, 0), 1, 8);
  EXPECT_EQ(no_nic.nic_in_slowdown(HostPathShare{1.0, 0.0, 1.0}), 1.0);
}

TEST(KvTiers, ARemoteCopyHalvesTheNicToo) {
  KvTierSpec spec = two_tiers(100, 0);
  spec.cluster_scope = true;
  spec.nic_bytes_per_s = 25e9;  // below the PCIe link's 50
  KvTiers tiers(spec, 2, 16);
  // Local: the all-to-all keeps min(25, 50 / 2) = 25, no slowdown; remote: min(25, 50) / 2.
  EXPECT_DOUBLE_EQ(tiers.nic_in_slowdown(HostPathShare{1.0, 0.0, 0.0}), 1.0);
  EXPECT_DOUBLE_EQ(tiers.nic_in_slowdown(HostPathShare{0.0, 1.0, 0.0}), 2.0);
  EXPECT_DOUBLE_EQ(tiers.nic_in_slowdown(HostPathShare{0.25, 0.5, 0.0}), 1.5);
}

}  // namespace
}  // namespace moesim::sim

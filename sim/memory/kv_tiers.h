// The tiers of KV cache below HBM: per node, host DRAM and local NVMe SSD, each an exclusive
// least-recently-used store of prefix entries (one 512-token prefix block of one attention rank,
// keyed by its content hash). The HBM tier is each rank's KvCache (kv_cache.h).
//
// Movement (every block is in exactly one place: a rank's HBM, one tier of one node, or gone):
// - demotion: an entry the HBM cache evicts goes to its node's DRAM; an entry DRAM evicts goes to
//   the node's SSD; an entry SSD evicts is dropped. A missing tier is skipped (HBM -> SSD when
//   there is no DRAM tier). When the node already holds the key in a lower tier (another rank
//   computed the same prefix), that copy is refreshed and the demoted one dropped. Demotions
//   take no simulated time: their bytes are counted on the links but they do not occupy them.
// - load (promotion): a prefix hit in a lower tier is taken out of it and copied into HBM before
//   the sequence's prefill. Each link is a FIFO resource with a "free at" clock: DRAM -> HBM
//   crosses the rank's GPU's host link (pcie_bytes_per_s per GPU, one direction, + latency);
//   SSD -> HBM reads the node's NVMe (nvme_bytes_per_s, shared by the node's GPUs, + latency)
//   into host memory, then crosses the same host link. Loads run beside the replica's steps (copy
//   engines): other sequences keep running; the loading sequence starts its prefill when its
//   load is ready.
// Scope "cluster" (Mooncake's distributed KV store): the DRAM tiers of all nodes form one pool,
// and so do the SSD tiers (capacity: per node x nodes; where in the pool an entry lies is not
// modelled beyond its home node, the node that demoted it). An entry whose home is the loading
// rank's node loads as above; one from another node crosses the network: remote DRAM -> HBM over
// the rank's GPU's NIC (nic_bytes_per_s + nic_latency_ns, a FIFO clock per GPU, GPUDirect RDMA),
// remote SSD -> HBM reads the home node's NVMe first. These network reads do not contend with
// the expert-parallel all-to-all in the network model.
// Nothing here reads clocks: `now` is passed in; recency is an internal insertion counter (an
// entry in a lower tier is never used in place, only taken out, so its LRU order is the order of
// demotion).
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/core/time.h"
#include "sim/metrics/kv_tier_counters.h"

namespace moesim::sim {

// The [kv_tiers] scenario table with the topology's [host] figures, validated by load_scenario.
struct KvTierSpec {
  bool enabled = false;             // the table is present
  int64_t dram_bytes_per_node = 0;  // 0: no DRAM tier
  int64_t ssd_bytes_per_node = 0;   // 0: no SSD tier
  double pcie_bytes_per_s = 0;      // per GPU, one direction (> 0 with any tier)
  SimTime pcie_latency_ns = 0;
  double nvme_bytes_per_s = 0;  // per node (> 0 with an SSD tier)
  SimTime nvme_latency_ns = 0;
  bool cluster_scope = false;  // "cluster": one DRAM pool and one SSD pool over all nodes
  double nic_bytes_per_s = 0;  // per GPU, one direction (> 0 with cluster scope)
  SimTime nic_latency_ns = 0;
};

// One lower tier of one node: an exclusive LRU store of entries with a byte capacity.
class KvTierStore {
 public:
  explicit KvTierStore(int64_t capacity_bytes);

  bool contains(uint64_t key) const { return entries_.count(key) > 0; }
  // Stores `key` (absent, checked) of `bytes` bytes as the most recent entry, first evicting
  // least-recently-used entries until it fits; the evicted (key, bytes) are appended to
  // `evicted`, oldest first. Returns false, changing nothing, when `bytes` exceed the capacity.
  bool insert(uint64_t key, int64_t bytes, std::vector<std::pair<uint64_t, int64_t>>* evicted);
  // Makes `key` (present, checked) the most recent entry.
  void touch(uint64_t key);
  // Removes `key`; returns its bytes (0 when absent).
  int64_t take(uint64_t key);

  int64_t capacity_bytes() const { return capacity_bytes_; }
  int64_t used_bytes() const { return used_bytes_; }
  int64_t num_entries() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    int64_t bytes = 0;
    uint64_t tick = 0;
  };
  int64_t capacity_bytes_;
  int64_t used_bytes_ = 0;
  uint64_t tick_ = 0;
  // Looked up by key only, never iterated.
  std::unordered_map<uint64_t, Entry> entries_;
  std::set<std::pair<uint64_t, uint64_t>> lru_;  // (tick, key): the eviction order
};

// The timing of one sequence's load from the lower tiers into HBM.
struct KvLoad {
  SimTime start_ns = 0;
  SimTime ready_ns = 0;  // when the last byte is in HBM (start_ns when nothing was loaded)
  int64_t dram_entries = 0;
  int64_t ssd_entries = 0;
  int64_t remote_entries = 0;  // of these, from another node's DRAM / SSD (cluster scope)
};

// The lower tiers of every node of the cluster, the host links' clocks and the counters.
class KvTiers {
 public:
  KvTiers(const KvTierSpec& spec, int32_t num_nodes, int32_t num_gpus);

  bool has_dram() const { return spec_.dram_bytes_per_node > 0; }
  bool has_ssd() const { return spec_.ssd_bytes_per_node > 0; }
  // The lower tier holding `key` on `node`: 1 DRAM, 2 SSD, 0 none.
  int tier_of(int32_t node, uint64_t key) const;
  // Number of leading `keys` that node `node`'s lower tiers hold.
  int64_t match(int32_t node, std::span<const uint64_t> keys) const;

  // An entry evicted from the HBM cache of a rank on `node`: `bytes_per_gpu` on each of the
  // rank's `gpus_per_copy` GPUs (the tiers store the whole rank's copy), demoted as above.
  void demote_from_hbm(int32_t node, uint64_t key, int64_t bytes_per_gpu, int32_t gpus_per_copy);
  // Takes `keys` (each in a lower tier of `node`, checked) out of the tiers and times their copy
  // into the HBM of the rank whose first GPU is global GPU `gpu`, starting at `now`. Counts hits
  // and bytes.
  KvLoad load(int32_t node, int32_t gpu, std::span<const uint64_t> keys, int64_t bytes_per_gpu,
              int32_t gpus_per_copy, SimTime now);

  // The tier stores that serve `node` (the one pool of each tier in cluster scope).
  const KvTierStore& dram(int32_t node) const { return dram_[pool_of(node)]; }
  const KvTierStore& ssd(int32_t node) const { return ssd_[pool_of(node)]; }
  // Hit and lookup counts are added by the schedulers (HBM hits, lookups); the rest here.
  KvTierCounters& counters() { return counters_; }
  // The counters with the entries the tiers hold now.
  KvTierCounters final_counters() const;

 private:
  // Stores a copy of `bytes` (total over the rank's GPUs) in tier `tier` (1 or 2) of `node`, or
  // the next tier below when `tier` is absent; cascades evictions; drops what falls off.
  void store(int32_t node, int tier, uint64_t key, int64_t bytes);
  void drop(uint64_t key, int64_t bytes);
  int32_t pool_of(int32_t node) const { return spec_.cluster_scope ? 0 : node; }
  // The node that demoted `key` (cluster scope), else `node`.
  int32_t home_of(int32_t node, uint64_t key) const;

  KvTierSpec spec_;
  std::vector<KvTierStore> dram_, ssd_;  // per node
  std::vector<SimTime> pcie_free_ns_;    // per GPU: host -> GPU direction
  std::vector<SimTime> nvme_free_ns_;    // per node
  std::vector<SimTime> nic_free_ns_;     // per GPU: network -> GPU direction (cluster scope)
  // Cluster scope: the home node of every entry in the pools (looked up by key, never iterated).
  std::unordered_map<uint64_t, int32_t> home_;
  KvTierCounters counters_;
  std::vector<std::pair<uint64_t, int64_t>> evicted_;  // scratch
};

}  // namespace moesim::sim

// The tiers of KV cache below HBM: per node (or pooled over the cluster), host DRAM and local
// NVMe SSD, each a least-recently-used store of prefix entries (one 512-token prefix block of one
// attention rank, keyed by its content hash). The HBM tier is each rank's KvCache (kv_cache.h).
//
// Entries are demoted from HBM to DRAM to SSD and loaded back before a prefill, exclusively or,
// with write-through (Mooncake's store), as copies. Every copy queues on its GPU's PCIe link
// (HostPathQueue, a FIFO per direction), which the all-to-all's GPUDirect RDMA traffic also
// crosses, so copies and collectives slow each other. Nothing here reads clocks: `now` is passed
// in, and recency is an insertion counter. docs/serving.md ("Tiered KV cache and cache-aware
// routing") has the movement rules, the cluster-wide store and the contention model.
#pragma once

#include <cstdint>
#include <deque>
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
  // Mooncake's store: a prefilled prompt's prefix blocks are copied to the lower tiers at once
  // (write_through), and loads copy from them instead of taking entries out (inclusive).
  bool write_through = false;
  // Per GPU, one direction: the topology's NIC rate (0 without a network); remote reads of the
  // cluster scope (> 0 there) and the all-to-all's share of the host path.
  double nic_bytes_per_s = 0;
  SimTime nic_latency_ns = 0;
};

// The copies over every GPU's host path in one direction: a FIFO per GPU of segments (one copy's
// bytes from one source) with start and end times, each tagged with the load it belongs to.
class HostPathQueue {
 public:
  struct Segment {
    SimTime start_ns = 0;
    SimTime end_ns = 0;   // the last byte crossed the path
    SimTime tail_ns = 0;  // latency after end_ns until the data is usable
    int64_t load_id = -1;
    bool remote = false;  // a network read (it also holds the NIC)
  };
  explicit HostPathQueue(int32_t num_gpus) : queues_(static_cast<size_t>(num_gpus)) {}

  // Queues a copy of `duration_ns` on `gpu` that may start at `earliest_ns`, after the GPU's
  // copies already queued; returns its end.
  SimTime push(int32_t gpu, SimTime earliest_ns, SimTime duration_ns, SimTime tail_ns,
               int64_t load_id, bool remote);
  // When the GPU's path is free of queued copies (0 when never used).
  SimTime free_ns(int32_t gpu) const;
  // The shares of [t0, t1) (t1 > t0) during which the GPU's path carries a local / remote copy.
  void busy_share(int32_t gpu, SimTime t0, SimTime t1, double* local, double* remote) const;
  // Every copy of `gpu` still in flight at t0, or queued after it, ends `delay_ns` later (the
  // queue is FIFO: the later ones start later too); the ids of their loads are appended to
  // `load_ids`. Copies that ended by t0 are forgotten.
  void delay(int32_t gpu, SimTime t0, SimTime delay_ns, std::vector<int64_t>* load_ids);
  // When load `load_id`'s data queued on `gpu` is usable (max of end + tail; 0 when none).
  SimTime ready_ns(int32_t gpu, int64_t load_id) const;

 private:
  std::vector<std::deque<Segment>> queues_;
};

// A GPU's fair-share view of one step: the shares of the step during which its host path carries
// copies in (local, remote) and out.
struct HostPathShare {
  double in_local = 0;
  double in_remote = 0;
  double out = 0;
  bool any() const { return in_local > 0 || in_remote > 0 || out > 0; }
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
  // The bytes of `key` (0 when absent).
  int64_t bytes_of(uint64_t key) const;

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
  int64_t id = -1;       // names the load in contend()'s moves (-1 when nothing was loaded)
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
  bool writes_through() const { return spec_.write_through; }
  // The lower tier holding `key` on `node`: 1 DRAM, 2 SSD, 0 none.
  int tier_of(int32_t node, uint64_t key) const;
  // Number of leading `keys` that node `node`'s lower tiers hold.
  int64_t match(int32_t node, std::span<const uint64_t> keys) const;

  // An entry evicted at `now` from the HBM cache of the rank on `node` whose first GPU is global
  // GPU `gpu`: `bytes_per_gpu` on each of the rank's `gpus_per_copy` consecutive GPUs (the tiers
  // store the whole rank's copy), demoted as above.
  void demote_from_hbm(int32_t node, int32_t gpu, uint64_t key, int64_t bytes_per_gpu,
                       int32_t gpus_per_copy, SimTime now);
  // Write-through (spec.write_through): a prefix entry the rank on `node` (first GPU `gpu`, as
  // above) just prefilled into its HBM at `now` is copied to the node's DRAM (or SSD), unless the
  // node's tiers already hold it (then refreshed); the copy occupies the rank's GPUs' host path
  // out like a demotion. The HBM copy stays.
  void write_through(int32_t node, int32_t gpu, uint64_t key, int64_t bytes_per_gpu,
                     int32_t gpus_per_copy, SimTime now);
  // Takes `keys` (each in a lower tier of `node`, checked) out of the tiers (with write-through:
  // copies them, the entries stay) and times their copy
  // into the HBM of the rank whose first of `gpus_per_copy` consecutive GPUs is global GPU `gpu`,
  // starting at `now`. Counts hits and bytes.
  KvLoad load(int32_t node, int32_t gpu, std::span<const uint64_t> keys, int64_t bytes_per_gpu,
              int32_t gpus_per_copy, SimTime now);

  // Host-link contention with a step of GPU `gpu` over [t0, t1) (t1 > t0): the shares of that
  // window its copies are in flight.
  HostPathShare busy_share(int32_t gpu, SimTime t0, SimTime t1) const;
  // The factors by which the time per byte of the GPU's network traffic in / out grows at these
  // shares: with a copy in flight the all-to-all gets the max-min fair share of the PCIe link
  // beside one bulk copy, min(nic, pcie / 2) (a remote copy also halves the NIC: min(nic, pcie) /
  // 2), so the factor is 1 + share x (nic / that rate - 1). 1 without a network.
  double nic_in_slowdown(const HostPathShare& share) const;
  double nic_out_slowdown(const HostPathShare& share) const;
  // After a step of GPU `gpu` over [t0, t1) moved `nic_in_bytes` / `nic_out_bytes` through its
  // NIC: the copies in flight lose the bytes the all-to-all took of their path while they ran,
  // nic bytes x busy share, so they end that / path rate later. Appends (load id, new ready) of
  // the loads whose ready time moved. Counts the delay.
  void contend(int32_t gpu, SimTime t0, SimTime t1, double nic_in_bytes, double nic_out_bytes,
               std::vector<std::pair<int64_t, SimTime>>* moved);

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
  // When `node`'s tiers hold `key`: refreshes that copy and returns true.
  bool refresh_if_held(int32_t node, uint64_t key);
  // A demoted or written-through entry of the rank on `node` (first GPU `gpu`): its copy out of
  // the rank's GPUs, counted, then stored in the node's DRAM (or below).
  void copy_to_dram(int32_t node, int32_t gpu, uint64_t key, int64_t bytes_per_gpu,
                    int32_t gpus_per_copy, SimTime now);
  // Queues the copy of `bytes_per_gpu` out of each of the rank's GPUs at `now`.
  void copy_out(int32_t gpu, int64_t bytes_per_gpu, int32_t gpus_per_copy, SimTime now);
  void drop(uint64_t key, int64_t bytes);
  int32_t pool_of(int32_t node) const { return spec_.cluster_scope ? 0 : node; }
  // The node that demoted `key` (cluster scope), else `node`.
  int32_t home_of(int32_t node, uint64_t key) const;

  // Rate of a remote read (NIC, then PCIe).
  double remote_bytes_per_s() const;

  KvTierSpec spec_;
  std::vector<KvTierStore> dram_, ssd_;  // per node
  HostPathQueue in_, out_;               // per GPU: host -> GPU, GPU -> host
  std::vector<SimTime> nvme_free_ns_;    // per node
  int64_t next_load_id_ = 0;
  std::vector<int64_t> load_ids_;  // scratch
  // Cluster scope: the home node of every entry in the pools (looked up by key, never iterated).
  std::unordered_map<uint64_t, int32_t> home_;
  KvTierCounters counters_;
  std::vector<std::pair<uint64_t, int64_t>> evicted_;  // scratch
};

}  // namespace moesim::sim

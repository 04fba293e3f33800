// Counters of the tiered KV cache (sim/memory/kv_tiers.h; docs/serving.md, "Tiered KV cache and
// cache-aware routing"), reported per tier. Tier index: 0 HBM, 1 host DRAM, 2 local SSD. A plain
// struct (header only) so that sim/memory fills it and sim/metrics reports it.
#pragma once

#include <array>
#include <cstdint>

namespace moesim::sim {

inline constexpr int kNumKvTiers = 3;
inline constexpr const char* kKvTierNames[kNumKvTiers] = {"hbm", "dram", "ssd"};

struct KvTierCounters {
  bool enabled = false;  // a [kv_tiers] table is in force
  // Prompt prefix blocks (512 tokens) looked up at first admissions: at most (prompt - 1) / 512
  // leading blocks of a prompt can hit (one token is always computed).
  int64_t lookup_blocks = 0;
  // Of these, leading blocks found in each tier (a match runs HBM first, then continues in the
  // node's DRAM, then SSD, and stops at the first block in no tier).
  std::array<int64_t, kNumKvTiers> hit_blocks{};
  // Bytes moved into / out of each tier: HBM in = loads (promotions), HBM out = demotions of
  // evicted entries; DRAM / SSD in = demotions into it, out = loads to HBM and demotions below.
  std::array<double, kNumKvTiers> bytes_in{};
  std::array<double, kNumKvTiers> bytes_out{};
  double dropped_bytes = 0;  // evicted from the lowest tier (or too large for any): gone
  int64_t dropped_entries = 0;
  // Demotions of entries the node's tiers already held (another rank's copy, or written
  // through): the HBM copy is freed, nothing moves.
  int64_t duplicate_entries = 0;
  int64_t num_loads = 0;  // admissions that waited for a load from DRAM / SSD
  // Write-through: bytes of prefilled prefix entries copied from HBM to the lower tiers (in
  // bytes_in of the tier they went to and in pcie_bytes; not in HBM's bytes_out: HBM keeps them).
  double written_through_bytes = 0;
  double pcie_bytes = 0;  // host <-> GPU bytes (demotions + loads), both directions
  double nvme_bytes = 0;  // NVMe bytes (writes of demotions + reads of loads)
  // Cluster scope: hit blocks loaded from another node's DRAM / SSD, and their network bytes.
  int64_t remote_hit_blocks = 0;
  double network_bytes = 0;
  // Host-link contention (docs/serving.md): seconds the all-to-all delayed copies into / out of
  // GPUs (summed over GPUs), and GPU-steps whose network traffic shared the GPU's PCIe link with
  // copies in flight (slowed by the fair share).
  double load_contention_s = 0;
  double demotion_contention_s = 0;
  int64_t slowed_gpu_steps = 0;
  // Entries (prefix blocks of 512 tokens) held at the end of the run by the lower tiers.
  std::array<int64_t, kNumKvTiers> entries_at_end{};
};

}  // namespace moesim::sim

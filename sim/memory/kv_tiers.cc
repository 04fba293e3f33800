#include "sim/memory/kv_tiers.h"

#include <algorithm>
#include <cmath>

#include "sim/core/check.h"

namespace moesim::sim {

KvTierStore::KvTierStore(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {
  MOESIM_CHECK(capacity_bytes >= 0, "negative tier capacity");
}

bool KvTierStore::insert(uint64_t key, int64_t bytes,
                         std::vector<std::pair<uint64_t, int64_t>>* evicted) {
  MOESIM_CHECK(!contains(key), "inserting an existing key into a KV tier");
  MOESIM_CHECK(bytes >= 0, "negative entry size");
  if (bytes > capacity_bytes_) return false;
  while (used_bytes_ + bytes > capacity_bytes_) {
    MOESIM_CHECK(!lru_.empty(), "KV tier bytes miscounted");
    const uint64_t victim = lru_.begin()->second;
    lru_.erase(lru_.begin());
    auto it = entries_.find(victim);
    used_bytes_ -= it->second.bytes;
    evicted->emplace_back(victim, it->second.bytes);
    entries_.erase(it);
  }
  entries_.emplace(key, Entry{bytes, ++tick_});
  lru_.emplace(tick_, key);
  used_bytes_ += bytes;
  return true;
}

void KvTierStore::touch(uint64_t key) {
  auto it = entries_.find(key);
  MOESIM_CHECK(it != entries_.end(), "touching a key not in the KV tier");
  lru_.erase({it->second.tick, key});
  it->second.tick = ++tick_;
  lru_.emplace(it->second.tick, key);
}

int64_t KvTierStore::take(uint64_t key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return 0;
  const int64_t bytes = it->second.bytes;
  lru_.erase({it->second.tick, key});
  used_bytes_ -= bytes;
  entries_.erase(it);
  return bytes;
}

KvTiers::KvTiers(const KvTierSpec& spec, int32_t num_nodes, int32_t num_gpus)
    : spec_(spec),
      dram_(spec.cluster_scope ? 1 : static_cast<size_t>(num_nodes),
            KvTierStore(spec.dram_bytes_per_node * (spec.cluster_scope ? num_nodes : 1))),
      ssd_(spec.cluster_scope ? 1 : static_cast<size_t>(num_nodes),
           KvTierStore(spec.ssd_bytes_per_node * (spec.cluster_scope ? num_nodes : 1))),
      pcie_free_ns_(static_cast<size_t>(num_gpus), 0),
      nvme_free_ns_(static_cast<size_t>(num_nodes), 0),
      nic_free_ns_(spec.cluster_scope ? static_cast<size_t>(num_gpus) : 0, 0) {
  MOESIM_CHECK(num_nodes >= 1 && num_gpus >= 1, "KV tiers need nodes and GPUs");
  MOESIM_CHECK(spec.pcie_bytes_per_s > 0, "KV tiers need a host link bandwidth");
  MOESIM_CHECK(!has_ssd() || spec.nvme_bytes_per_s > 0, "an SSD tier needs an NVMe bandwidth");
  MOESIM_CHECK(!spec.cluster_scope || spec.nic_bytes_per_s > 0, "a KV pool needs a network");
  counters_.enabled = true;
}

int KvTiers::tier_of(int32_t node, uint64_t key) const {
  if (dram_[pool_of(node)].contains(key)) return 1;
  if (ssd_[pool_of(node)].contains(key)) return 2;
  return 0;
}

int32_t KvTiers::home_of(int32_t node, uint64_t key) const {
  if (!spec_.cluster_scope) return node;
  auto it = home_.find(key);
  MOESIM_CHECK(it != home_.end(), "a pooled KV entry without a home node");
  return it->second;
}

int64_t KvTiers::match(int32_t node, std::span<const uint64_t> keys) const {
  int64_t n = 0;
  for (uint64_t key : keys) {
    if (tier_of(node, key) == 0) break;
    ++n;
  }
  return n;
}

void KvTiers::drop(uint64_t key, int64_t bytes) {
  if (spec_.cluster_scope && tier_of(0, key) == 0) home_.erase(key);
  counters_.dropped_bytes += static_cast<double>(bytes);
  counters_.dropped_entries++;
}

void KvTiers::store(int32_t node, int tier, uint64_t key, int64_t bytes) {
  if (tier == 1 && !has_dram()) tier = 2;
  if (tier == 2 && !has_ssd()) {
    drop(key, bytes);
    return;
  }
  KvTierStore& st = tier == 1 ? dram_[pool_of(node)] : ssd_[pool_of(node)];
  const size_t first = evicted_.size();
  if (!st.insert(key, bytes, &evicted_)) {
    drop(key, bytes);  // larger than the whole tier
    return;
  }
  counters_.bytes_in[tier] += static_cast<double>(bytes);
  if (tier == 2) counters_.nvme_bytes += static_cast<double>(bytes);
  // Entries this insert evicted, oldest first: DRAM's go to SSD, SSD's are dropped. Copied out
  // of the scratch vector first: the cascade below appends to it.
  std::vector<std::pair<uint64_t, int64_t>> out(evicted_.begin() + static_cast<ptrdiff_t>(first),
                                                evicted_.end());
  evicted_.resize(first);
  for (const auto& [k, b] : out) {
    counters_.bytes_out[tier] += static_cast<double>(b);
    if (tier == 1) {
      store(home_of(node, k), 2, k, b);  // an evicted entry keeps its home
    } else {
      drop(k, b);
    }
  }
}

void KvTiers::demote_from_hbm(int32_t node, uint64_t key, int64_t bytes_per_gpu,
                              int32_t gpus_per_copy) {
  const int64_t bytes = bytes_per_gpu * gpus_per_copy;
  counters_.bytes_out[0] += static_cast<double>(bytes);
  counters_.pcie_bytes += static_cast<double>(bytes);
  const int tier = tier_of(node, key);
  if (tier != 0) {
    // The node already holds this prefix below HBM: keep that copy, refreshed.
    (tier == 1 ? dram_[pool_of(node)] : ssd_[pool_of(node)]).touch(key);
    drop(key, bytes);
    return;
  }
  if (spec_.cluster_scope) home_[key] = node;
  store(node, 1, key, bytes);
}

KvLoad KvTiers::load(int32_t node, int32_t gpu, std::span<const uint64_t> keys,
                     int64_t bytes_per_gpu, int32_t gpus_per_copy, SimTime now) {
  KvLoad out;
  out.start_ns = now;
  out.ready_ns = now;
  // Remote entries (cluster scope), per home node: DRAM entries, SSD entries.
  std::vector<std::pair<int32_t, std::pair<int64_t, int64_t>>> remote;
  for (uint64_t key : keys) {
    const int tier = tier_of(node, key);
    MOESIM_CHECK(tier != 0, "loading a key that no lower tier holds");
    const int32_t home = home_of(node, key);
    const int64_t bytes = (tier == 1 ? dram_[pool_of(node)] : ssd_[pool_of(node)]).take(key);
    if (spec_.cluster_scope) home_.erase(key);
    MOESIM_CHECK(bytes == bytes_per_gpu * gpus_per_copy, "KV tier entry size changed");
    (tier == 1 ? out.dram_entries : out.ssd_entries)++;
    counters_.hit_blocks[tier]++;
    counters_.bytes_out[tier] += static_cast<double>(bytes);
    counters_.bytes_in[0] += static_cast<double>(bytes);
    if (tier == 2) counters_.nvme_bytes += static_cast<double>(bytes);
    if (home == node) {
      counters_.pcie_bytes += static_cast<double>(bytes);
      continue;
    }
    auto it = std::find_if(remote.begin(), remote.end(),
                           [home](const auto& r) { return r.first == home; });
    if (it == remote.end()) it = remote.insert(remote.end(), {home, {0, 0}});
    (tier == 1 ? it->second.first : it->second.second)++;
    out.remote_entries++;
    counters_.remote_hit_blocks++;
    counters_.network_bytes += static_cast<double>(bytes);
  }
  if (out.dram_entries + out.ssd_entries == 0) return out;
  counters_.num_loads++;
  // Durations in double, rounded once.
  auto ns = [](double bytes, double per_s) { return std::llround(bytes / per_s * 1e9); };
  for (const auto& [home, counts] : remote) {
    // Another node's DRAM (and NVMe first for its SSD entries), then the GPU's NIC.
    SimTime& nic = nic_free_ns_[gpu];
    if (counts.first > 0) {
      nic = std::max(now, nic) +
            ns(static_cast<double>(counts.first * bytes_per_gpu), spec_.nic_bytes_per_s);
      out.ready_ns = std::max(out.ready_ns, nic + spec_.nic_latency_ns);
    }
    if (counts.second > 0) {
      SimTime& nvme = nvme_free_ns_[home];
      nvme = std::max(now, nvme) +
             ns(static_cast<double>(counts.second * bytes_per_gpu * gpus_per_copy),
                spec_.nvme_bytes_per_s);
      nic = std::max(nvme + spec_.nvme_latency_ns, nic) +
            ns(static_cast<double>(counts.second * bytes_per_gpu), spec_.nic_bytes_per_s);
      out.ready_ns = std::max(out.ready_ns, nic + spec_.nic_latency_ns);
    }
  }
  int64_t local_dram = out.dram_entries, local_ssd = out.ssd_entries;
  for (const auto& [home, counts] : remote) {
    local_dram -= counts.first;
    local_ssd -= counts.second;
  }
  SimTime& pcie = pcie_free_ns_[gpu];
  if (local_dram > 0) {
    const double b = static_cast<double>(local_dram * bytes_per_gpu);
    pcie = std::max(now, pcie) + ns(b, spec_.pcie_bytes_per_s);
    out.ready_ns = std::max(out.ready_ns, pcie + spec_.pcie_latency_ns);
  }
  if (local_ssd > 0) {
    // NVMe -> host memory (the node's drives, every GPU copy of the rank), then host -> GPU.
    SimTime& nvme = nvme_free_ns_[node];
    const double node_bytes = static_cast<double>(local_ssd * bytes_per_gpu * gpus_per_copy);
    nvme = std::max(now, nvme) + ns(node_bytes, spec_.nvme_bytes_per_s);
    const SimTime in_host = nvme + spec_.nvme_latency_ns;
    const double b = static_cast<double>(local_ssd * bytes_per_gpu);
    pcie = std::max(in_host, pcie) + ns(b, spec_.pcie_bytes_per_s);
    out.ready_ns = std::max(out.ready_ns, pcie + spec_.pcie_latency_ns);
  }
  return out;
}

KvTierCounters KvTiers::final_counters() const {
  KvTierCounters c = counters_;
  c.entries_at_end = {};
  for (const KvTierStore& s : dram_) c.entries_at_end[1] += s.num_entries();
  for (const KvTierStore& s : ssd_) c.entries_at_end[2] += s.num_entries();
  return c;
}

}  // namespace moesim::sim

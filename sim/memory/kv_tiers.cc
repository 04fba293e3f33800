#include "sim/memory/kv_tiers.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

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

int64_t KvTierStore::bytes_of(uint64_t key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.bytes;
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

SimTime HostPathQueue::push(int32_t gpu, SimTime earliest_ns, SimTime duration_ns, SimTime tail_ns,
                            int64_t load_id, bool remote) {
  std::deque<Segment>& q = queues_[static_cast<size_t>(gpu)];
  const SimTime start = std::max(earliest_ns, q.empty() ? SimTime{0} : q.back().end_ns);
  q.push_back(Segment{start, start + duration_ns, tail_ns, load_id, remote});
  return start + duration_ns;
}

SimTime HostPathQueue::free_ns(int32_t gpu) const {
  const std::deque<Segment>& q = queues_[static_cast<size_t>(gpu)];
  return q.empty() ? 0 : q.back().end_ns;
}

void HostPathQueue::busy_share(int32_t gpu, SimTime t0, SimTime t1, double* local,
                               double* remote) const {
  MOESIM_CHECK(t1 > t0, "an empty contention window");
  SimTime busy[2] = {0, 0};
  for (const Segment& seg : queues_[static_cast<size_t>(gpu)]) {
    if (seg.start_ns >= t1) break;  // FIFO: the later ones start later
    const SimTime overlap = std::min(seg.end_ns, t1) - std::max(seg.start_ns, t0);
    if (overlap > 0) busy[seg.remote ? 1 : 0] += overlap;
  }
  const double span = static_cast<double>(t1 - t0);
  *local = static_cast<double>(busy[0]) / span;
  *remote = static_cast<double>(busy[1]) / span;
}

void HostPathQueue::delay(int32_t gpu, SimTime t0, SimTime delay_ns,
                          std::vector<int64_t>* load_ids) {
  std::deque<Segment>& q = queues_[static_cast<size_t>(gpu)];
  while (!q.empty() && q.front().end_ns <= t0) q.pop_front();
  if (delay_ns <= 0) return;
  for (Segment& seg : q) {
    if (seg.start_ns > t0) seg.start_ns += delay_ns;
    seg.end_ns += delay_ns;
    if (load_ids->empty() || load_ids->back() != seg.load_id) load_ids->push_back(seg.load_id);
  }
}

SimTime HostPathQueue::ready_ns(int32_t gpu, int64_t load_id) const {
  SimTime ready = 0;
  for (const Segment& seg : queues_[static_cast<size_t>(gpu)]) {
    if (seg.load_id == load_id) ready = std::max(ready, seg.end_ns + seg.tail_ns);
  }
  return ready;
}

KvTiers::KvTiers(const KvTierSpec& spec, int32_t num_nodes, int32_t num_gpus)
    : spec_(spec),
      dram_(spec.cluster_scope ? 1 : static_cast<size_t>(num_nodes),
            KvTierStore(spec.dram_bytes_per_node * (spec.cluster_scope ? num_nodes : 1))),
      ssd_(spec.cluster_scope ? 1 : static_cast<size_t>(num_nodes),
           KvTierStore(spec.ssd_bytes_per_node * (spec.cluster_scope ? num_nodes : 1))),
      in_(num_gpus),
      out_(num_gpus),
      nvme_free_ns_(static_cast<size_t>(num_nodes), 0) {
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

void KvTiers::demote_from_hbm(int32_t node, int32_t gpu, uint64_t key, int64_t bytes_per_gpu,
                              int32_t gpus_per_copy, SimTime now) {
  // The node already holds this prefix below HBM (another rank computed it, or it was written
  // through): that copy is kept, refreshed; nothing moves.
  if (refresh_if_held(node, key)) {
    counters_.duplicate_entries++;
    return;
  }
  counters_.bytes_out[0] += static_cast<double>(bytes_per_gpu * gpus_per_copy);
  copy_to_dram(node, gpu, key, bytes_per_gpu, gpus_per_copy, now);
}

void KvTiers::write_through(int32_t node, int32_t gpu, uint64_t key, int64_t bytes_per_gpu,
                            int32_t gpus_per_copy, SimTime now) {
  MOESIM_CHECK(spec_.write_through, "write-through without the option");
  if (refresh_if_held(node, key)) return;
  counters_.written_through_bytes += static_cast<double>(bytes_per_gpu * gpus_per_copy);
  copy_to_dram(node, gpu, key, bytes_per_gpu, gpus_per_copy, now);
}

bool KvTiers::refresh_if_held(int32_t node, uint64_t key) {
  const int tier = tier_of(node, key);
  if (tier == 0) return false;
  (tier == 1 ? dram_[pool_of(node)] : ssd_[pool_of(node)]).touch(key);
  return true;
}

void KvTiers::copy_to_dram(int32_t node, int32_t gpu, uint64_t key, int64_t bytes_per_gpu,
                           int32_t gpus_per_copy, SimTime now) {
  const int64_t bytes = bytes_per_gpu * gpus_per_copy;
  counters_.pcie_bytes += static_cast<double>(bytes);
  copy_out(gpu, bytes_per_gpu, gpus_per_copy, now);
  if (spec_.cluster_scope) home_[key] = node;
  store(node, 1, key, bytes);
}

void KvTiers::copy_out(int32_t gpu, int64_t bytes_per_gpu, int32_t gpus_per_copy, SimTime now) {
  const SimTime copy_ns =
      std::llround(static_cast<double>(bytes_per_gpu) / spec_.pcie_bytes_per_s * 1e9);
  for (int32_t g = gpu; g < gpu + gpus_per_copy; ++g) {
    out_.push(g, now, copy_ns, spec_.pcie_latency_ns, -1, false);
  }
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
    KvTierStore& st = tier == 1 ? dram_[pool_of(node)] : ssd_[pool_of(node)];
    int64_t bytes = 0;
    if (spec_.write_through) {
      bytes = st.bytes_of(key);  // a copy: the entry stays (inclusive store)
      st.touch(key);
    } else {
      bytes = st.take(key);
      if (spec_.cluster_scope) home_.erase(key);
      counters_.bytes_out[tier] += static_cast<double>(bytes);
    }
    MOESIM_CHECK(bytes == bytes_per_gpu * gpus_per_copy, "KV tier entry size changed");
    (tier == 1 ? out.dram_entries : out.ssd_entries)++;
    counters_.hit_blocks[tier]++;
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
  out.id = next_load_id_++;
  // Durations in double, rounded once. Every GPU of the rank receives its share over its own host
  // path in, in this order: remote entries per home node (that node's NVMe first for its SSD
  // entries), local DRAM entries, local SSD entries (the node's NVMe first).
  auto ns = [](double bytes, double per_s) { return std::llround(bytes / per_s * 1e9); };
  const double per_gpu = static_cast<double>(bytes_per_gpu);
  auto copy_in = [&](SimTime earliest, int64_t entries, double per_s, SimTime tail, bool remote) {
    for (int32_t g = gpu; g < gpu + gpus_per_copy; ++g) {
      const SimTime end = in_.push(g, earliest, ns(static_cast<double>(entries) * per_gpu, per_s),
                                   tail, out.id, remote);
      out.ready_ns = std::max(out.ready_ns, end + tail);
    }
  };
  auto nvme_read = [&](int32_t at_node, int64_t entries) {
    SimTime& nvme = nvme_free_ns_[at_node];
    nvme = std::max(now, nvme) +
           ns(static_cast<double>(entries) * per_gpu * gpus_per_copy, spec_.nvme_bytes_per_s);
    return nvme + spec_.nvme_latency_ns;
  };
  for (const auto& [home, counts] : remote) {
    if (counts.first > 0) {
      copy_in(now, counts.first, remote_bytes_per_s(), spec_.nic_latency_ns, true);
    }
    if (counts.second > 0) {
      copy_in(nvme_read(home, counts.second), counts.second, remote_bytes_per_s(),
              spec_.nic_latency_ns, true);
    }
  }
  int64_t local_dram = out.dram_entries, local_ssd = out.ssd_entries;
  for (const auto& [home, counts] : remote) {
    local_dram -= counts.first;
    local_ssd -= counts.second;
  }
  if (local_dram > 0)
    copy_in(now, local_dram, spec_.pcie_bytes_per_s, spec_.pcie_latency_ns, false);
  if (local_ssd > 0) {
    copy_in(nvme_read(node, local_ssd), local_ssd, spec_.pcie_bytes_per_s, spec_.pcie_latency_ns,
            false);
  }
  return out;
}

double KvTiers::remote_bytes_per_s() const {
  return std::min(spec_.nic_bytes_per_s, spec_.pcie_bytes_per_s);
}

HostPathShare KvTiers::busy_share(int32_t gpu, SimTime t0, SimTime t1) const {
  HostPathShare share;
  in_.busy_share(gpu, t0, t1, &share.in_local, &share.in_remote);
  double out_remote = 0;
  out_.busy_share(gpu, t0, t1, &share.out, &out_remote);
  return share;
}

double KvTiers::nic_in_slowdown(const HostPathShare& share) const {
  const double nic = spec_.nic_bytes_per_s;
  if (!(nic > 0)) return 1.0;
  const double beside_local = std::min(nic, spec_.pcie_bytes_per_s / 2);
  const double beside_remote = std::min(nic, spec_.pcie_bytes_per_s) / 2;
  return 1.0 + share.in_local * (nic / beside_local - 1.0) +
         share.in_remote * (nic / beside_remote - 1.0);
}

double KvTiers::nic_out_slowdown(const HostPathShare& share) const {
  const double nic = spec_.nic_bytes_per_s;
  if (!(nic > 0)) return 1.0;
  return 1.0 + share.out * (nic / std::min(nic, spec_.pcie_bytes_per_s / 2) - 1.0);
}

void KvTiers::contend(int32_t gpu, SimTime t0, SimTime t1, double nic_in_bytes,
                      double nic_out_bytes, std::vector<std::pair<int64_t, SimTime>>* moved) {
  const HostPathShare share = busy_share(gpu, t0, t1);
  auto ns = [](double seconds) { return static_cast<SimTime>(std::llround(seconds * 1e9)); };
  const SimTime in_delay =
      ns(nic_in_bytes * (share.in_local / spec_.pcie_bytes_per_s +
                         (share.in_remote > 0 ? share.in_remote / remote_bytes_per_s() : 0.0)));
  const SimTime out_delay = ns(nic_out_bytes * share.out / spec_.pcie_bytes_per_s);
  load_ids_.clear();
  out_.delay(gpu, t0, out_delay, &load_ids_);
  if (out_delay > 0) counters_.demotion_contention_s += to_seconds(out_delay);
  load_ids_.clear();
  in_.delay(gpu, t0, in_delay, &load_ids_);
  if (in_delay <= 0) return;
  counters_.load_contention_s += to_seconds(in_delay);
  std::sort(load_ids_.begin(), load_ids_.end());
  load_ids_.erase(std::unique(load_ids_.begin(), load_ids_.end()), load_ids_.end());
  for (int64_t id : load_ids_) moved->emplace_back(id, in_.ready_ns(gpu, id));
}

KvTierCounters KvTiers::final_counters() const {
  KvTierCounters c = counters_;
  c.entries_at_end = {};
  for (const KvTierStore& s : dram_) c.entries_at_end[1] += s.num_entries();
  for (const KvTierStore& s : ssd_) c.entries_at_end[2] += s.num_entries();
  return c;
}

}  // namespace moesim::sim

#include "sim/policy/hot_expert_replication.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/check.h"
#include "sim/config/toml_source.h"

namespace moesim::sim {

HotExpertReplicationConfig parse_hot_expert_replication_config(TomlTable& t) {
  HotExpertReplicationConfig c;
  c.window_s = t.get_double_in_or("window_s", 0.0, 1e9, c.window_s);
  if (c.window_s <= 0.0) t.fail("window_s", "must be > 0");
  c.window_buckets =
      static_cast<int32_t>(t.get_int_in_or("window_buckets", 1, 1 << 16, c.window_buckets));
  c.top_fraction = t.get_double_in_or("top_fraction", 0.0, 1.0, c.top_fraction);
  if (c.top_fraction <= 0.0) t.fail("top_fraction", "must be in (0, 1]");
  c.target = t.get_enum_or("target", {"every_node", "k_gpus"}, "every_node") == "k_gpus"
                 ? HotExpertReplicationConfig::Target::kKGpus
                 : HotExpertReplicationConfig::Target::kEveryNode;
  c.k = static_cast<int32_t>(t.get_int_in_or("k", 1, 1 << 20, c.k));
  c.period_s = t.get_double_in_or("period_s", 0.0, 1e9, c.period_s);
  if (c.period_s <= 0.0) t.fail("period_s", "must be > 0");
  c.max_extra_slots_per_gpu = static_cast<int32_t>(
      t.get_int_in_or("max_extra_slots_per_gpu", 1, 1 << 20, c.max_extra_slots_per_gpu));
  t.finish();
  return c;
}

ExpertLoadWindow::ExpertLoadWindow(int32_t num_experts, SimTime window_ns, int32_t num_buckets)
    : num_experts_(num_experts),
      num_buckets_(num_buckets),
      bucket_ns_(num_buckets >= 1 ? window_ns / num_buckets : 0),
      bucket_id_(static_cast<size_t>(std::max(num_buckets, 1)), -1),
      sums_(static_cast<size_t>(std::max(num_buckets, 1)) * std::max(num_experts, 1), 0.0) {
  MOESIM_CHECK(num_experts >= 1 && num_buckets >= 1, "experts and buckets");
  MOESIM_CHECK(bucket_ns_ >= 1, "window of at least one ns per bucket");
}

void ExpertLoadWindow::add(SimTime now_ns, std::span<const double> loads) {
  MOESIM_CHECK(now_ns >= last_ns_, "loads arrive in time order");
  MOESIM_CHECK(static_cast<int32_t>(loads.size()) == num_experts_, "one load per expert");
  last_ns_ = now_ns;
  const int64_t b = bucket_of(now_ns);
  const size_t slot = static_cast<size_t>(b % num_buckets_);
  double* row = sums_.data() + slot * num_experts_;
  if (bucket_id_[slot] != b) {
    bucket_id_[slot] = b;
    std::fill(row, row + num_experts_, 0.0);
  }
  for (int32_t e = 0; e < num_experts_; ++e) row[e] += loads[e];
}

std::vector<double> ExpertLoadWindow::loads(SimTime now_ns) const {
  MOESIM_CHECK(now_ns >= last_ns_, "window queried at or after the last sample");
  const int64_t now_b = bucket_of(now_ns);
  std::vector<double> out(num_experts_, 0.0);
  for (int32_t slot = 0; slot < num_buckets_; ++slot) {
    const int64_t b = bucket_id_[slot];
    if (b < 0 || b <= now_b - num_buckets_) continue;
    const double* row = sums_.data() + static_cast<size_t>(slot) * num_experts_;
    for (int32_t e = 0; e < num_experts_; ++e) out[e] += row[e];
  }
  return out;
}

HotExpertReplication::HotExpertReplication(const HotExpertReplicationConfig& config,
                                           ExpertPlacement base, double replica_weight_bytes)
    : config_(config), base_(std::move(base)), replica_weight_bytes_(replica_weight_bytes) {
  MOESIM_CHECK(replica_weight_bytes > 0.0, "a replica has weights");
}

ExpertLoadWindow HotExpertReplication::make_window() const {
  return ExpertLoadWindow(base_.num_experts(), from_seconds(config_.window_s),
                          config_.window_buckets);
}

ReplicationPlan HotExpertReplication::plan(std::span<const double> expert_loads,
                                           const ExpertPlacement& current) const {
  const int32_t num_experts = base_.num_experts();
  const int32_t num_gpus = base_.num_gpus();
  MOESIM_CHECK(static_cast<int32_t>(expert_loads.size()) == num_experts, "one load per expert");
  MOESIM_CHECK(current.num_experts() == num_experts && current.num_gpus() == num_gpus,
               "current placement matches the base");
  auto hosts = [](std::span<const int32_t> gpus, int32_t g) {
    return std::find(gpus.begin(), gpus.end(), g) != gpus.end();
  };
  for (int32_t e = 0; e < num_experts; ++e) {
    MOESIM_CHECK(expert_loads[e] >= 0.0, "loads are non-negative");
    for (int32_t g : base_.replicas(e)) {
      MOESIM_CHECK(hosts(current.replicas(e), g), "current placement holds the base replicas");
    }
  }
  ReplicationPlan out;
  // Hot set: hottest first, equal loads by expert id, zero loads never hot.
  std::vector<int32_t> order(num_experts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return expert_loads[a] > expert_loads[b]; });
  const auto num_hot = static_cast<int32_t>(
      std::ceil(config_.top_fraction * static_cast<double>(num_experts) - 1e-9));
  for (int32_t i = 0; i < num_hot && i < num_experts; ++i) {
    if (expert_loads[order[i]] > 0.0) out.hot_experts.push_back(order[i]);
  }

  // The desired placement grows from the base; estimated loads split each expert evenly.
  std::vector<std::vector<int32_t>> desired(num_experts);
  std::vector<double> est_load(num_gpus, 0.0);
  for (int32_t e = 0; e < num_experts; ++e) {
    desired[e].assign(base_.replicas(e).begin(), base_.replicas(e).end());
    for (int32_t g : desired[e]) est_load[g] += expert_loads[e] / desired[e].size();
  }
  std::vector<int32_t> extra_slots(num_gpus, 0);
  auto add_desired = [&](int32_t e, int32_t g) {
    const double load = expert_loads[e];
    const double r = static_cast<double>(desired[e].size());
    for (int32_t h : desired[e]) est_load[h] -= load / r - load / (r + 1.0);
    desired[e].push_back(g);
    est_load[g] += load / (r + 1.0);
    ++extra_slots[g];
  };
  // The best destination for e among GPUs [first, last): see the file comment.
  auto choose = [&](int32_t e, int32_t first, int32_t last) {
    int32_t best = -1;
    for (int32_t g = first; g < last; ++g) {
      if (extra_slots[g] >= config_.max_extra_slots_per_gpu || hosts(desired[e], g)) continue;
      if (best < 0) {
        best = g;
        continue;
      }
      const bool g_cur = hosts(current.replicas(e), g);
      const bool best_cur = hosts(current.replicas(e), best);
      if (g_cur != best_cur) {
        if (g_cur) best = g;
      } else if (est_load[g] < est_load[best]) {
        best = g;
      }
    }
    return best;
  };
  const int32_t gpus_per_node = base_.gpus_per_node();
  const int32_t num_nodes = num_gpus / gpus_per_node;
  for (int32_t e : out.hot_experts) {
    if (config_.target == HotExpertReplicationConfig::Target::kEveryNode) {
      for (int32_t n = 0; n < num_nodes; ++n) {
        const bool present = std::any_of(desired[e].begin(), desired[e].end(),
                                         [&](int32_t g) { return g / gpus_per_node == n; });
        if (present) continue;
        const int32_t g = choose(e, n * gpus_per_node, (n + 1) * gpus_per_node);
        if (g < 0) {
          ++out.num_skipped_for_capacity;
        } else {
          add_desired(e, g);
        }
      }
    } else {
      for (int32_t i = 0; i < config_.k; ++i) {
        const int32_t g = choose(e, 0, num_gpus);
        if (g < 0) {
          out.num_skipped_for_capacity += config_.k - i;
          break;
        }
        add_desired(e, g);
      }
    }
    // Copies for the new GPUs, from a kept current holder (on the destination's node if any).
    const std::span<const int32_t> cur = current.replicas(e);
    for (int32_t g : desired[e]) {
      if (hosts(cur, g)) continue;
      int32_t src = -1;
      for (int32_t h : cur) {
        if (!hosts(desired[e], h)) continue;
        const bool same_node = h / gpus_per_node == g / gpus_per_node;
        if (src < 0 || (same_node && src / gpus_per_node != g / gpus_per_node)) src = h;
      }
      MOESIM_CHECK(src >= 0, "a base replica is always a source");
      out.additions.push_back(ReplicaAddition{e, src, g});
    }
  }
  for (int32_t e = 0; e < num_experts; ++e) {
    for (int32_t g : current.replicas(e)) {
      if (!hosts(desired[e], g)) out.removals.push_back(ReplicaRemoval{e, g});
    }
  }
  return out;
}

void HotExpertReplication::apply(const ReplicationPlan& plan, ExpertPlacement& placement) {
  for (const ReplicaRemoval& r : plan.removals) placement.remove_replica(r.expert_idx, r.gpu_idx);
  for (const ReplicaAddition& a : plan.additions) {
    placement.add_replica(a.expert_idx, a.dst_gpu_idx);
  }
}

std::vector<double> HotExpertReplication::transfer_traffic(const ReplicationPlan& plan) const {
  const auto p = static_cast<size_t>(base_.num_gpus());
  std::vector<double> bytes(p * p, 0.0);
  for (const ReplicaAddition& a : plan.additions) {
    bytes[static_cast<size_t>(a.src_gpu_idx) * p + static_cast<size_t>(a.dst_gpu_idx)] +=
        replica_weight_bytes_;
  }
  return bytes;
}

std::vector<double> HotExpertReplication::extra_weight_bytes_per_gpu(
    const ReplicationPlan& plan) const {
  std::vector<double> bytes(base_.num_gpus(), 0.0);
  for (const ReplicaAddition& a : plan.additions) bytes[a.dst_gpu_idx] += replica_weight_bytes_;
  return bytes;
}

std::vector<double> HotExpertReplication::freed_weight_bytes_per_gpu(
    const ReplicationPlan& plan) const {
  std::vector<double> bytes(base_.num_gpus(), 0.0);
  for (const ReplicaRemoval& r : plan.removals) bytes[r.gpu_idx] += replica_weight_bytes_;
  return bytes;
}

}  // namespace moesim::sim

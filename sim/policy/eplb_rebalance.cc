#include "sim/policy/eplb_rebalance.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"
#include "sim/config/toml_source.h"

namespace moesim::sim {
namespace {

bool hosts(std::span<const int32_t> gpus, int32_t g) {
  return std::find(gpus.begin(), gpus.end(), g) != gpus.end();
}

// Greedy matching of n rows to n columns by the largest overlap, ties to the lower (row,
// column). Returns the column of each row.
std::vector<int32_t> greedy_match(const std::vector<int64_t>& overlap, int32_t n) {
  std::vector<int32_t> col_of(n, -1);
  std::vector<bool> col_used(n, false);
  for (int32_t round = 0; round < n; ++round) {
    int32_t best_r = -1, best_c = -1;
    for (int32_t r = 0; r < n; ++r) {
      if (col_of[r] >= 0) continue;
      for (int32_t c = 0; c < n; ++c) {
        if (col_used[c]) continue;
        if (best_r < 0 || overlap[static_cast<size_t>(r) * n + c] >
                              overlap[static_cast<size_t>(best_r) * n + best_c]) {
          best_r = r;
          best_c = c;
        }
      }
    }
    col_of[best_r] = best_c;
    col_used[best_c] = true;
  }
  return col_of;
}

// Experts both spans (ascending) hold.
int64_t common(std::span<const int32_t> a, std::span<const int32_t> b) {
  int64_t n = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++n;
      ++i;
      ++j;
    }
  }
  return n;
}

}  // namespace

EplbPolicyConfig parse_eplb_policy_config(TomlTable& t, int32_t num_experts, int32_t num_groups,
                                          int32_t num_nodes, int32_t num_gpus) {
  EplbPolicyConfig c;
  c.min_imbalance_gain = t.get_double_in_or("min_imbalance_gain", 0.0, 1e6, c.min_imbalance_gain);
  c.balance = parse_eplb_config(t, num_experts, num_groups, num_nodes, num_gpus);  // finishes
  return c;
}

EplbRebalancer::EplbRebalancer(const EplbPolicyConfig& config, int32_t num_moe_layers,
                               const ExpertPlacement& initial, int32_t num_groups,
                               double slot_weight_bytes)
    : config_(config),
      shape_(eplb_shape(config.balance, initial.num_experts(), num_groups,
                        initial.num_gpus() / initial.gpus_per_node(), initial.num_gpus())),
      num_gpus_(initial.num_gpus()),
      gpus_per_node_(initial.gpus_per_node()),
      num_shared_experts_(initial.num_shared_experts()),
      slot_weight_bytes_(slot_weight_bytes),
      average_(num_moe_layers, initial.num_experts(), config.balance.average,
               config.balance.ema_alpha, config.balance.window_samples) {
  MOESIM_CHECK(slot_weight_bytes > 0.0, "an expert has weights");
}

void EplbRebalancer::observe(int32_t moe_layer_idx, std::span<const double> selections) {
  average_.add(moe_layer_idx, selections);
}

std::vector<double> EplbRebalancer::gpu_loads(const ExpertPlacement& p,
                                              std::span<const double> loads) {
  MOESIM_CHECK(static_cast<int32_t>(loads.size()) == p.num_experts(), "one load per expert");
  std::vector<double> out(p.num_gpus(), 0.0);
  for (int32_t e = 0; e < p.num_experts(); ++e) {
    const std::span<const int32_t> gpus = p.replicas(e);
    for (int32_t g : gpus) out[g] += loads[e] / static_cast<double>(gpus.size());
  }
  return out;
}

double EplbRebalancer::imbalance(const ExpertPlacement& p, std::span<const double> loads) {
  const std::vector<double> g = gpu_loads(p, loads);
  const double total = std::accumulate(g.begin(), g.end(), 0.0);
  if (total <= 0.0) return 1.0;
  return *std::max_element(g.begin(), g.end()) / (total / static_cast<double>(g.size()));
}

ExpertPlacement EplbRebalancer::align_to(const ExpertPlacement& target,
                                         const ExpertPlacement& current) {
  const int32_t num_gpus = target.num_gpus();
  const int32_t gpn = target.gpus_per_node();
  MOESIM_CHECK(current.num_gpus() == num_gpus && current.gpus_per_node() == gpn &&
                   current.num_experts() == target.num_experts(),
               "placements of the same shape");
  const int32_t num_nodes = num_gpus / gpn;
  // Nodes: replicas of the target node's GPUs whose expert the current node holds.
  std::vector<int32_t> node_of(num_nodes);
  std::iota(node_of.begin(), node_of.end(), 0);
  if (num_nodes > 1) {
    std::vector<int64_t> overlap(static_cast<size_t>(num_nodes) * num_nodes, 0);
    for (int32_t e = 0; e < target.num_experts(); ++e) {
      std::vector<bool> cur_on(num_nodes, false);
      for (int32_t g : current.replicas(e)) cur_on[g / gpn] = true;
      for (int32_t g : target.replicas(e)) {
        for (int32_t cn = 0; cn < num_nodes; ++cn) {
          if (cur_on[cn]) ++overlap[static_cast<size_t>(g / gpn) * num_nodes + cn];
        }
      }
    }
    node_of = greedy_match(overlap, num_nodes);
  }
  // GPUs within each matched pair of nodes.
  std::vector<int32_t> gpu_of(num_gpus);
  std::vector<int64_t> overlap(static_cast<size_t>(gpn) * gpn);
  for (int32_t tn = 0; tn < num_nodes; ++tn) {
    const int32_t cn = node_of[tn];
    for (int32_t i = 0; i < gpn; ++i) {
      for (int32_t j = 0; j < gpn; ++j) {
        overlap[static_cast<size_t>(i) * gpn + j] =
            common(target.experts_on(tn * gpn + i), current.experts_on(cn * gpn + j));
      }
    }
    const std::vector<int32_t> match = greedy_match(overlap, gpn);
    for (int32_t i = 0; i < gpn; ++i) gpu_of[tn * gpn + i] = cn * gpn + match[i];
  }
  std::vector<std::vector<int32_t>> replicas(target.num_experts());
  for (int32_t e = 0; e < target.num_experts(); ++e) {
    for (int32_t g : target.replicas(e)) replicas[e].push_back(gpu_of[g]);
    std::sort(replicas[e].begin(), replicas[e].end());
  }
  return ExpertPlacement(target.num_experts(), num_gpus, gpn, target.num_shared_experts(),
                         std::move(replicas), "eplb");
}

EplbPlan EplbRebalancer::plan(int32_t moe_layer_idx, const ExpertPlacement& current) const {
  MOESIM_CHECK(current.num_experts() == shape_.num_experts && current.num_gpus() == num_gpus_ &&
                   current.gpus_per_node() == gpus_per_node_,
               "current placement of the balancer's shape");
  MOESIM_CHECK(moe_layer_idx >= 0 && moe_layer_idx < average_.num_layers(), "a MoE layer");
  EplbPlan out;
  out.moe_layer_idx = moe_layer_idx;
  if (average_.num_samples(moe_layer_idx) == 0) return out;
  const std::vector<double> loads = average_.average(moe_layer_idx);
  if (std::accumulate(loads.begin(), loads.end(), 0.0) <= 0.0) return out;
  EplbLayout layout = balance_experts(loads, shape_);
  const ExpertPlacement balanced(shape_.num_experts, num_gpus_, gpus_per_node_, num_shared_experts_,
                                 std::move(layout.replicas_of_expert), "eplb");
  out.target.emplace(align_to(balanced, current));
  const ExpertPlacement& target = *out.target;
  for (int32_t e = 0; e < shape_.num_experts; ++e) {
    const std::span<const int32_t> cur = current.replicas(e);
    for (int32_t g : target.replicas(e)) {
      if (hosts(cur, g)) continue;
      int32_t src = cur.front();
      for (int32_t h : cur) {
        if (h / gpus_per_node_ == g / gpus_per_node_) {
          src = h;
          break;
        }
      }
      out.copies.push_back(ReplicaAddition{e, src, g});
    }
    for (int32_t g : cur) {
      if (!hosts(target.replicas(e), g)) out.drops.push_back(ReplicaRemoval{e, g});
    }
  }
  out.current_imbalance = imbalance(current, loads);
  out.target_imbalance = imbalance(target, loads);
  if (out.copies.empty() && out.drops.empty()) {
    out.decision = EplbPlan::Decision::kUnchanged;
  } else if (out.current_imbalance - out.target_imbalance <= config_.min_imbalance_gain) {
    out.decision = EplbPlan::Decision::kNoGain;
  } else {
    out.decision = EplbPlan::Decision::kApply;
  }
  return out;
}

std::vector<double> EplbRebalancer::transfer_traffic(std::span<const EplbPlan> plans) const {
  const auto p = static_cast<size_t>(num_gpus_);
  std::vector<double> bytes(p * p, 0.0);
  for (const EplbPlan& plan : plans) {
    for (const ReplicaAddition& c : plan.copies) {
      bytes[static_cast<size_t>(c.src_gpu_idx) * p + static_cast<size_t>(c.dst_gpu_idx)] +=
          slot_weight_bytes_;
    }
  }
  return bytes;
}

}  // namespace moesim::sim

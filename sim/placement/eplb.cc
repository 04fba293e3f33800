#include "sim/placement/eplb.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"
#include "sim/config/config_error.h"
#include "sim/config/toml_source.h"

namespace moesim::sim {
namespace {

[[noreturn]] void shape_error(const std::string& source, const std::string& key,
                              const std::string& reason) {
  throw ConfigError(source, 0, 0, key, reason);
}

// Items (weights[i], conflict key keys[i] or -1) into num_packs packs of equal size, heaviest
// first into the lightest pack with a free slot that holds no item of the same key. Returns
// each pack's items in insertion order.
std::vector<std::vector<int32_t>> balanced_packing(std::span<const double> weights,
                                                   int32_t num_packs,
                                                   std::span<const int32_t> keys) {
  const auto num_items = static_cast<int32_t>(weights.size());
  MOESIM_CHECK(num_packs >= 1 && num_items % num_packs == 0, "items divide over the packs");
  const int32_t per_pack = num_items / num_packs;
  std::vector<std::vector<int32_t>> packs(num_packs);
  if (per_pack == 1) {
    for (int32_t i = 0; i < num_items; ++i) packs[i].push_back(i);
    return packs;
  }
  std::vector<int32_t> order(num_items);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return weights[a] > weights[b]; });
  std::vector<double> pack_load(num_packs, 0.0);
  auto hosts = [&](int32_t pack, int32_t key) {
    if (key < 0) return false;
    for (int32_t j : packs[pack]) {
      if (keys[j] == key) return true;
    }
    return false;
  };
  auto key_of = [&](int32_t item) { return keys.empty() ? -1 : keys[item]; };
  for (int32_t item : order) {
    const int32_t key = key_of(item);
    int32_t best = -1;
    for (int32_t p = 0; p < num_packs; ++p) {
      if (static_cast<int32_t>(packs[p].size()) >= per_pack || hosts(p, key)) continue;
      if (best < 0 || pack_load[p] < pack_load[best]) best = p;
    }
    if (best >= 0) {
      packs[best].push_back(item);
      pack_load[best] += weights[item];
      continue;
    }
    // Every pack with a free slot already hosts `key`: swap with an item of a full pack that does
    // not host it, choosing one whose key the free pack lacks (file comment: always exists).
    int32_t free_pack = -1;
    for (int32_t p = 0; p < num_packs; ++p) {
      if (static_cast<int32_t>(packs[p].size()) >= per_pack) continue;
      if (free_pack < 0 || pack_load[p] < pack_load[free_pack]) free_pack = p;
    }
    MOESIM_CHECK(free_pack >= 0, "a pack has a free slot");
    int32_t swap_pack = -1;
    size_t swap_pos = 0;
    for (int32_t p = 0; p < num_packs; ++p) {
      if (p == free_pack || hosts(p, key)) continue;
      if (swap_pack >= 0 && pack_load[p] >= pack_load[swap_pack]) continue;
      int32_t pos = -1;
      for (size_t j = 0; j < packs[p].size(); ++j) {
        const int32_t y = packs[p][j];
        if (hosts(free_pack, key_of(y))) continue;
        if (pos < 0 || weights[y] < weights[packs[p][pos]] ||
            (weights[y] == weights[packs[p][pos]] && y < packs[p][pos])) {
          pos = static_cast<int32_t>(j);
        }
      }
      if (pos < 0) continue;
      swap_pack = p;
      swap_pos = static_cast<size_t>(pos);
    }
    MOESIM_CHECK(swap_pack >= 0, "a swap partner exists");
    const int32_t moved = packs[swap_pack][swap_pos];
    packs[swap_pack][swap_pos] = item;
    pack_load[swap_pack] += weights[item] - weights[moved];
    packs[free_pack].push_back(moved);
    pack_load[free_pack] += weights[moved];
  }
  return packs;
}

// Redundant slots, one at a time, to the expert with the largest load per replica (never above
// max_replicas). Returns the physical slot -> expert map (experts first, then the redundant
// slots in the order they were added) and fills replica_count.
std::vector<int32_t> replicate(std::span<const double> loads, int32_t num_slots,
                               int32_t max_replicas, std::vector<int32_t>& replica_count) {
  const auto num_experts = static_cast<int32_t>(loads.size());
  std::vector<int32_t> slot_expert(num_experts);
  std::iota(slot_expert.begin(), slot_expert.end(), 0);
  replica_count.assign(num_experts, 1);
  for (int32_t s = num_experts; s < num_slots; ++s) {
    int32_t best = -1;
    for (int32_t e = 0; e < num_experts; ++e) {
      if (replica_count[e] >= max_replicas) continue;
      if (best < 0 || loads[e] / replica_count[e] > loads[best] / replica_count[best]) best = e;
    }
    MOESIM_CHECK(best >= 0, "slots within the replica cap");
    slot_expert.push_back(best);
    ++replica_count[best];
  }
  return slot_expert;
}

// "; the nearest valid: 16 redundant slots (272 slots) or 32 (288 slots)": the multiples of the
// GPU count at or above the experts on either side of the given slot count.
std::string nearest_valid_slots(const EplbShape& s) {
  const int64_t gpus = s.num_gpus, experts = s.num_experts;
  const int64_t first = (experts + gpus - 1) / gpus * gpus;  // the fewest valid slots
  const int64_t lower = std::max(first, s.num_physical_slots / gpus * gpus);
  const int64_t higher = std::max(first, (s.num_physical_slots + gpus - 1) / gpus * gpus);
  auto text = [&](int64_t slots, bool first_named) {
    return std::to_string(slots - experts) + (first_named ? " redundant slots (" : " (") +
           std::to_string(slots) + " slots)";
  };
  if (lower == higher || lower > s.num_physical_slots) {
    return "; the nearest valid: " + text(higher, true);
  }
  return "; the nearest valid: " + text(lower, true) + " or " + text(higher, false);
}

}  // namespace

void validate_eplb_shape(const EplbShape& s, const std::string& source) {
  if (s.num_experts < 1) shape_error(source, "num_experts", "must be >= 1");
  if (s.num_gpus < 1) shape_error(source, "num_gpus", "must be >= 1");
  if (s.num_nodes < 1 || s.num_gpus % s.num_nodes != 0) {
    shape_error(source, "num_nodes",
                "must be >= 1 and divide the " + std::to_string(s.num_gpus) + " GPUs");
  }
  if (s.num_groups < 1 || s.num_experts % s.num_groups != 0) {
    shape_error(source, "num_groups",
                "must be >= 1 and divide the " + std::to_string(s.num_experts) + " experts");
  }
  if (s.num_physical_slots < s.num_experts || s.num_physical_slots % s.num_gpus != 0) {
    shape_error(source, "num_physical_slots",
                std::to_string(s.num_physical_slots) +
                    " slots: must be at least the experts and a multiple of the " +
                    std::to_string(s.num_gpus) + " GPUs" + nearest_valid_slots(s));
  }
  const bool hier = eplb_is_hierarchical(s);
  const int64_t scope_gpus = hier ? s.num_gpus / s.num_nodes : s.num_gpus;
  const int64_t scope_experts = hier ? s.num_experts / s.num_nodes : s.num_experts;
  const int64_t scope_slots = hier ? s.num_physical_slots / s.num_nodes : s.num_physical_slots;
  if (scope_slots > scope_experts * scope_gpus) {
    shape_error(source, "num_physical_slots",
                std::to_string(s.num_physical_slots) +
                    " slots need more replicas of an expert than there are GPUs to hold them");
  }
}

bool eplb_is_hierarchical(const EplbShape& shape) {
  return shape.num_nodes > 1 && shape.num_groups % shape.num_nodes == 0;
}

EplbLayout balance_experts(std::span<const double> expert_loads, const EplbShape& shape) {
  MOESIM_CHECK(static_cast<int32_t>(expert_loads.size()) == shape.num_experts,
               "one load per expert");
  for (double w : expert_loads) MOESIM_CHECK(w >= 0.0, "loads are non-negative");
  const bool hier = eplb_is_hierarchical(shape);
  const int32_t num_nodes = hier ? shape.num_nodes : 1;
  const int32_t num_groups = hier ? shape.num_groups : 1;
  const int32_t group_size = shape.num_experts / num_groups;
  const int32_t gpus_per_node = shape.num_gpus / num_nodes;
  const int32_t slots_per_node = shape.num_physical_slots / num_nodes;
  const int32_t slots_per_gpu = shape.num_physical_slots / shape.num_gpus;

  // 1. Groups to nodes.
  std::vector<double> group_loads(num_groups, 0.0);
  for (int32_t e = 0; e < shape.num_experts; ++e) group_loads[e / group_size] += expert_loads[e];
  const std::vector<std::vector<int32_t>> node_groups =
      balanced_packing(group_loads, num_nodes, {});

  EplbLayout out;
  out.physical_to_logical.assign(shape.num_physical_slots, -1);
  out.replica_count.assign(shape.num_experts, 0);
  std::vector<int32_t> node_experts, count;
  std::vector<double> node_loads, slot_loads;
  for (int32_t n = 0; n < num_nodes; ++n) {
    node_experts.clear();
    for (int32_t g : node_groups[n]) {
      for (int32_t j = 0; j < group_size; ++j) node_experts.push_back(g * group_size + j);
    }
    node_loads.clear();
    for (int32_t e : node_experts) node_loads.push_back(expert_loads[e]);
    // 2. Replicate within the node.
    const std::vector<int32_t> slot_expert =
        replicate(node_loads, slots_per_node, gpus_per_node, count);
    // 3. Pack the node's physical replicas onto its GPUs.
    slot_loads.clear();
    for (int32_t i : slot_expert) slot_loads.push_back(node_loads[i] / count[i]);
    const std::vector<std::vector<int32_t>> gpu_items =
        balanced_packing(slot_loads, gpus_per_node, slot_expert);
    for (int32_t q = 0; q < gpus_per_node; ++q) {
      for (size_t r = 0; r < gpu_items[q].size(); ++r) {
        const int32_t slot = (n * gpus_per_node + q) * slots_per_gpu + static_cast<int32_t>(r);
        out.physical_to_logical[slot] = node_experts[slot_expert[gpu_items[q][r]]];
      }
    }
    for (size_t i = 0; i < node_experts.size(); ++i) out.replica_count[node_experts[i]] = count[i];
  }
  out.replicas_of_expert.assign(shape.num_experts, {});
  out.gpu_loads.assign(shape.num_gpus, 0.0);
  for (int32_t p = 0; p < shape.num_physical_slots; ++p) {
    const int32_t e = out.physical_to_logical[p];
    MOESIM_CHECK(e >= 0, "every slot is assigned");
    const int32_t gpu = p / slots_per_gpu;
    out.replicas_of_expert[e].push_back(gpu);
    out.gpu_loads[gpu] += expert_loads[e] / out.replica_count[e];
  }
  for (auto& gpus : out.replicas_of_expert) std::sort(gpus.begin(), gpus.end());
  return out;
}

std::vector<ExpertPlacement> balance_placements(
    const std::vector<std::vector<double>>& expert_loads, const EplbShape& shape,
    int32_t gpus_per_node, int32_t num_shared_experts) {
  std::vector<ExpertPlacement> out;
  out.reserve(expert_loads.size());
  for (const std::vector<double>& loads : expert_loads) {
    EplbLayout layout = balance_experts(loads, shape);
    out.emplace_back(shape.num_experts, shape.num_gpus, gpus_per_node, num_shared_experts,
                     std::move(layout.replicas_of_expert), "eplb");
  }
  return out;
}

const char* load_average_kind_name(LoadAverageKind kind) {
  return kind == LoadAverageKind::kExponential ? "exponential" : "window";
}

ExpertLoadAverage::ExpertLoadAverage(int32_t num_layers, int32_t num_experts, LoadAverageKind kind,
                                     double ema_alpha, int32_t window_samples)
    : num_experts_(num_experts),
      kind_(kind),
      ema_alpha_(ema_alpha),
      window_samples_(window_samples),
      num_samples_(num_layers, 0) {
  MOESIM_CHECK(num_layers >= 1 && num_experts >= 1, "a layer and an expert");
  MOESIM_CHECK(kind != LoadAverageKind::kExponential || (ema_alpha > 0.0 && ema_alpha <= 1.0),
               "ema_alpha in (0, 1]");
  MOESIM_CHECK(kind != LoadAverageKind::kWindow || window_samples >= 1, "window_samples >= 1");
  const size_t per_layer =
      static_cast<size_t>(num_experts) * (kind == LoadAverageKind::kWindow ? window_samples : 1);
  values_.assign(per_layer * num_layers, 0.0);
}

void ExpertLoadAverage::add(int32_t layer_idx, std::span<const double> expert_loads) {
  MOESIM_CHECK(layer_idx >= 0 && layer_idx < num_layers(), "layer range");
  MOESIM_CHECK(static_cast<int32_t>(expert_loads.size()) == num_experts_, "one load per expert");
  const size_t e_count = static_cast<size_t>(num_experts_);
  if (kind_ == LoadAverageKind::kExponential) {
    double* avg = values_.data() + static_cast<size_t>(layer_idx) * e_count;
    for (size_t e = 0; e < e_count; ++e) {
      avg[e] = num_samples_[layer_idx] == 0 ? expert_loads[e]
                                            : avg[e] + ema_alpha_ * (expert_loads[e] - avg[e]);
    }
  } else {
    const size_t slot = static_cast<size_t>(num_samples_[layer_idx] % window_samples_);
    double* row =
        values_.data() + (static_cast<size_t>(layer_idx) * window_samples_ + slot) * e_count;
    std::copy(expert_loads.begin(), expert_loads.end(), row);
  }
  ++num_samples_[layer_idx];
}

std::vector<double> ExpertLoadAverage::average(int32_t layer_idx) const {
  MOESIM_CHECK(layer_idx >= 0 && layer_idx < num_layers(), "layer range");
  const size_t e_count = static_cast<size_t>(num_experts_);
  if (kind_ == LoadAverageKind::kExponential) {
    const double* avg = values_.data() + static_cast<size_t>(layer_idx) * e_count;
    return std::vector<double>(avg, avg + e_count);
  }
  std::vector<double> out(e_count, 0.0);
  const int64_t n = std::min<int64_t>(num_samples_[layer_idx], window_samples_);
  if (n == 0) return out;
  // Oldest to newest, so the sum's rounding depends only on the samples.
  for (int64_t i = num_samples_[layer_idx] - n; i < num_samples_[layer_idx]; ++i) {
    const double* row = values_.data() + (static_cast<size_t>(layer_idx) * window_samples_ +
                                          static_cast<size_t>(i % window_samples_)) *
                                             e_count;
    for (size_t e = 0; e < e_count; ++e) out[e] += row[e];
  }
  for (double& x : out) x /= static_cast<double>(n);
  return out;
}

EplbShape eplb_shape(const EplbConfig& config, int32_t num_experts, int32_t num_groups,
                     int32_t num_nodes, int32_t num_gpus) {
  EplbShape s;
  s.num_experts = num_experts;
  s.num_physical_slots = num_experts + config.redundant_slots;
  s.num_gpus = num_gpus;
  const bool global = config.variant == EplbConfig::Variant::kGlobal;
  s.num_groups = global ? 1 : num_groups;
  s.num_nodes = global ? 1 : num_nodes;
  return s;
}

EplbConfig parse_eplb_config(TomlTable& t, int32_t num_experts, int32_t num_groups,
                             int32_t num_nodes, int32_t num_gpus) {
  EplbConfig c;
  c.redundant_slots =
      static_cast<int32_t>(t.get_int_in_or("redundant_slots", 0, 1 << 20, num_gpus));
  const std::string variant = t.get_enum_or("variant", {"auto", "hierarchical", "global"}, "auto");
  c.variant = variant == "auto"           ? EplbConfig::Variant::kAuto
              : variant == "hierarchical" ? EplbConfig::Variant::kHierarchical
                                          : EplbConfig::Variant::kGlobal;
  if (c.variant == EplbConfig::Variant::kHierarchical &&
      (num_nodes < 2 || num_groups % num_nodes != 0)) {
    t.fail("variant", "hierarchical needs the " + std::to_string(num_groups) +
                          " expert groups to divide evenly over " + std::to_string(num_nodes) +
                          " nodes (at least 2)");
  }
  c.average = t.get_enum_or("average", {"exponential", "window"}, "exponential") == "window"
                  ? LoadAverageKind::kWindow
                  : LoadAverageKind::kExponential;
  c.ema_alpha = t.get_double_in_or("ema_alpha", 0.0, 1.0, c.ema_alpha);
  if (c.ema_alpha <= 0.0) t.fail("ema_alpha", "must be in (0, 1]");
  c.window_samples =
      static_cast<int32_t>(t.get_int_in_or("window_samples", 1, 1 << 20, c.window_samples));
  c.period_s = t.get_double_in_or("period_s", 0.0, 1e9, c.period_s);
  if (c.period_s <= 0.0) t.fail("period_s", "must be > 0");
  try {
    validate_eplb_shape(eplb_shape(c, num_experts, num_groups, num_nodes, num_gpus), t.file());
  } catch (const ConfigError& e) {
    t.fail("redundant_slots", e.reason());
  }
  t.finish();
  return c;
}

EplbBalancer::EplbBalancer(const EplbConfig& config, int32_t num_layers, int32_t num_experts,
                           int32_t num_groups, int32_t num_gpus, int32_t gpus_per_node,
                           int32_t num_shared_experts)
    : config_(config),
      shape_(eplb_shape(config, num_experts, num_groups, num_gpus / gpus_per_node, num_gpus)),
      gpus_per_node_(gpus_per_node),
      num_shared_experts_(num_shared_experts),
      average_(num_layers, num_experts, config.average, config.ema_alpha, config.window_samples) {
  MOESIM_CHECK(gpus_per_node >= 1 && num_gpus % gpus_per_node == 0, "GPUs divide into nodes");
}

void EplbBalancer::observe(int32_t layer_idx, std::span<const double> expert_loads) {
  average_.add(layer_idx, expert_loads);
}

std::vector<ExpertPlacement> EplbBalancer::rebalance() const {
  std::vector<std::vector<double>> loads;
  for (int32_t l = 0; l < average_.num_layers(); ++l) {
    loads.push_back(average_.num_samples(l) == 0
                        ? std::vector<double>(static_cast<size_t>(shape_.num_experts), 1.0)
                        : average_.average(l));
  }
  return balance_placements(loads, shape_, gpus_per_node_, num_shared_experts_);
}

}  // namespace moesim::sim

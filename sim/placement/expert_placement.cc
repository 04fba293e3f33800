#include "sim/placement/expert_placement.h"

#include <algorithm>

#include "base/check.h"
#include "sim/config/config_error.h"
#include "sim/config/toml_source.h"

namespace moesim::sim {
namespace {

[[noreturn]] void placement_error(const std::string& source, const std::string& key,
                                  const std::string& reason) {
  throw ConfigError(source, 0, 0, key, reason);
}

void check_shape(int32_t num_experts, int32_t num_gpus, int32_t gpus_per_node,
                 int32_t num_shared_experts, const std::string& source) {
  if (num_experts < 1) placement_error(source, "num_experts", "must be >= 1");
  if (num_gpus < 1) placement_error(source, "num_gpus", "must be >= 1");
  if (gpus_per_node < 1 || num_gpus % gpus_per_node != 0) {
    placement_error(source, "gpus_per_node",
                    "must be >= 1 and divide the EP group's " + std::to_string(num_gpus) +
                        " GPUs, got " + std::to_string(gpus_per_node));
  }
  if (num_shared_experts < 0) placement_error(source, "num_shared_experts", "must be >= 0");
}

std::vector<std::vector<int32_t>> static_layout(int32_t num_experts, int32_t num_gpus, bool strided,
                                                const std::string& source) {
  if (num_gpus < 1 || num_experts % num_gpus != 0) {
    placement_error(source, "layout",
                    "the " + std::to_string(num_experts) + " experts do not divide evenly over " +
                        std::to_string(num_gpus) + " GPUs");
  }
  const int32_t per_gpu = num_experts / num_gpus;
  std::vector<std::vector<int32_t>> replicas(num_experts);
  for (int32_t e = 0; e < num_experts; ++e) replicas[e] = {strided ? e % num_gpus : e / per_gpu};
  return replicas;
}

}  // namespace

ExpertPlacement ExpertPlacement::contiguous(int32_t num_experts, int32_t num_gpus,
                                            int32_t gpus_per_node, int32_t num_shared_experts,
                                            const std::string& source) {
  return ExpertPlacement(num_experts, num_gpus, gpus_per_node, num_shared_experts,
                         static_layout(num_experts, num_gpus, false, source), source);
}

ExpertPlacement ExpertPlacement::strided(int32_t num_experts, int32_t num_gpus,
                                         int32_t gpus_per_node, int32_t num_shared_experts,
                                         const std::string& source) {
  return ExpertPlacement(num_experts, num_gpus, gpus_per_node, num_shared_experts,
                         static_layout(num_experts, num_gpus, true, source), source);
}

ExpertPlacement::ExpertPlacement(int32_t num_experts, int32_t num_gpus, int32_t gpus_per_node,
                                 int32_t num_shared_experts,
                                 std::vector<std::vector<int32_t>> replicas_of_expert,
                                 const std::string& source)
    : num_experts_(num_experts),
      num_gpus_(num_gpus),
      gpus_per_node_(gpus_per_node),
      num_shared_experts_(num_shared_experts),
      replicas_(std::move(replicas_of_expert)) {
  check_shape(num_experts, num_gpus, gpus_per_node, num_shared_experts, source);
  if (replicas_.size() != static_cast<size_t>(num_experts)) {
    placement_error(source, "replicas", "expected one replica list per expert");
  }
  for (int32_t e = 0; e < num_experts; ++e) {
    std::vector<int32_t>& gpus = replicas_[e];
    const std::string key = "replicas[" + std::to_string(e) + "]";
    if (gpus.empty()) placement_error(source, key, "expert " + std::to_string(e) + " has no GPU");
    std::sort(gpus.begin(), gpus.end());
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (gpus[i] < 0 || gpus[i] >= num_gpus) {
        placement_error(source, key,
                        "GPU " + std::to_string(gpus[i]) + " is not in the EP group [0, " +
                            std::to_string(num_gpus) + ")");
      }
      if (i > 0 && gpus[i] == gpus[i - 1]) {
        placement_error(
            source, key,
            "GPU " + std::to_string(gpus[i]) + " listed twice for expert " + std::to_string(e));
      }
    }
  }
  rebuild_derived();
}

void ExpertPlacement::rebuild_derived() {
  experts_on_gpu_.assign(num_gpus_, {});
  primary_gpu_.assign(num_experts_, -1);
  total_slots_ = 0;
  for (int32_t e = 0; e < num_experts_; ++e) {
    primary_gpu_[e] = replicas_[e].front();
    total_slots_ += static_cast<int32_t>(replicas_[e].size());
    for (int32_t g : replicas_[e]) experts_on_gpu_[g].push_back(e);
  }
}

void ExpertPlacement::add_replica(int32_t expert_idx, int32_t gpu_idx) {
  MOESIM_CHECK(expert_idx >= 0 && expert_idx < num_experts_, "expert range");
  MOESIM_CHECK(gpu_idx >= 0 && gpu_idx < num_gpus_, "GPU range");
  std::vector<int32_t>& gpus = replicas_[expert_idx];
  const auto it = std::lower_bound(gpus.begin(), gpus.end(), gpu_idx);
  MOESIM_CHECK(it == gpus.end() || *it != gpu_idx, "GPU already hosts the expert");
  gpus.insert(it, gpu_idx);
  rebuild_derived();
}

void ExpertPlacement::remove_replica(int32_t expert_idx, int32_t gpu_idx) {
  MOESIM_CHECK(expert_idx >= 0 && expert_idx < num_experts_, "expert range");
  std::vector<int32_t>& gpus = replicas_[expert_idx];
  const auto it = std::find(gpus.begin(), gpus.end(), gpu_idx);
  MOESIM_CHECK(it != gpus.end(), "GPU does not host the expert");
  MOESIM_CHECK(gpus.size() > 1, "cannot remove an expert's last replica");
  gpus.erase(it);
  rebuild_derived();
}

int32_t ExpertPlacement::max_slots_per_gpu() const {
  int32_t m = 0;
  for (const auto& experts : experts_on_gpu_) m = std::max(m, static_cast<int32_t>(experts.size()));
  return m;
}

void ReplicaDispatcher::water_fill(int64_t count, int32_t expert_idx,
                                   const ExpertPlacement& placement, std::span<int32_t> dst_row) {
  const std::span<const int32_t> gpus = placement.replicas(expert_idx);
  // Candidates sorted by (load, GPU id); give each unit to the least loaded, ties to the lowest
  // id: raise the lowest loads level by level, then spread the rest in id order.
  std::sort(candidates_.begin(), candidates_.end(), [&](int32_t a, int32_t b) {
    const int64_t la = gpu_load_[gpus[a]];
    const int64_t lb = gpu_load_[gpus[b]];
    return la != lb ? la < lb : gpus[a] < gpus[b];
  });
  const size_t r = candidates_.size();
  auto give = [&](int32_t pos, int64_t units) {
    const int32_t gpu = gpus[pos];
    gpu_load_[gpu] += units;
    dst_row[gpu] += static_cast<int32_t>(units);
    slot_loads_[slot_offsets_[expert_idx] + pos] += units;
  };
  size_t num_level = 1;
  int64_t level = gpu_load_[gpus[candidates_[0]]];
  while (count > 0) {
    while (num_level < r && gpu_load_[gpus[candidates_[num_level]]] == level) ++num_level;
    const int64_t next = num_level < r ? gpu_load_[gpus[candidates_[num_level]]] : -1;
    const int64_t capacity = next >= 0 ? static_cast<int64_t>(num_level) * (next - level) : -1;
    if (capacity >= 0 && count >= capacity) {
      for (size_t i = 0; i < num_level; ++i) give(candidates_[i], next - level);
      count -= capacity;
      level = next;
      continue;
    }
    // The first num_level candidates are at `level`: equal shares, remainder to the lowest ids.
    std::sort(candidates_.begin(), candidates_.begin() + num_level,
              [&](int32_t a, int32_t b) { return gpus[a] < gpus[b]; });
    const int64_t each = count / static_cast<int64_t>(num_level);
    const int64_t rest = count % static_cast<int64_t>(num_level);
    for (size_t i = 0; i < num_level; ++i) {
      give(candidates_[i], each + (static_cast<int64_t>(i) < rest ? 1 : 0));
    }
    count = 0;
  }
}

void ReplicaDispatcher::dispatch(const ExpertPlacement& placement, const CountMatrix& src_expert,
                                 CountMatrix& src_dst) {
  const int32_t num_gpus = placement.num_gpus();
  const int32_t num_experts = placement.num_experts();
  MOESIM_CHECK(src_expert.num_rows() == num_gpus && src_expert.num_cols() == num_experts,
               "dispatch needs num_gpus x num_experts selections");
  src_dst.reset(num_gpus, num_gpus);
  begin(placement);
  for (int32_t s = 0; s < num_gpus; ++s) {
    const std::span<const int32_t> row = src_expert.row(s);
    const std::span<int32_t> dst_row = src_dst.row(s);
    const int32_t src_node = placement.node_of(s);
    for (int32_t e = 0; e < num_experts; ++e) {
      const int32_t c = row[e];
      if (c == 0) continue;
      const std::span<const int32_t> gpus = placement.replicas(e);
      if (gpus.size() == 1) {
        gpu_load_[gpus[0]] += c;
        dst_row[gpus[0]] += c;
        slot_loads_[slot_offsets_[e]] += c;
        continue;
      }
      candidates_.clear();
      for (size_t i = 0; i < gpus.size(); ++i) {
        if (placement.node_of(gpus[i]) == src_node) candidates_.push_back(static_cast<int32_t>(i));
      }
      if (candidates_.empty()) {
        for (size_t i = 0; i < gpus.size(); ++i) candidates_.push_back(static_cast<int32_t>(i));
      }
      water_fill(c, e, placement, dst_row);
    }
  }
}

void ReplicaDispatcher::begin(const ExpertPlacement& placement) {
  const int32_t num_experts = placement.num_experts();
  gpu_load_.assign(placement.num_gpus(), 0);
  slot_offsets_.resize(num_experts + 1);
  slot_offsets_[0] = 0;
  for (int32_t e = 0; e < num_experts; ++e) {
    slot_offsets_[e + 1] = slot_offsets_[e] + static_cast<int32_t>(placement.replicas(e).size());
  }
  slot_loads_.assign(slot_offsets_[num_experts], 0);
}

void ReplicaDispatcher::dispatch_totals(const ExpertPlacement& placement,
                                        std::span<const int64_t> expert_totals,
                                        std::span<const int64_t> group_tokens,
                                        std::span<const int32_t> group_node,
                                        std::vector<int64_t>& dst_totals,
                                        std::vector<int64_t>& local_totals) {
  const int32_t num_gpus = placement.num_gpus();
  const int32_t num_experts = placement.num_experts();
  MOESIM_CHECK(expert_totals.size() == static_cast<size_t>(num_experts), "one total per expert");
  MOESIM_CHECK(group_tokens.size() == group_node.size(), "one node per source group");
  begin(placement);
  dst_scratch_.assign(num_gpus, 0);
  local_totals.assign(num_gpus, 0);
  before_.resize(num_gpus);  // candidate positions are below any expert's replica count
  const std::span<int32_t> dst(dst_scratch_);
  int64_t tokens = 0;
  for (int64_t t : group_tokens) tokens += t;
  if (tokens == 0) {
    dst_totals.assign(num_gpus, 0);
    return;
  }
  // Group-major, expert-minor, as dispatch() is source-major: group j's part of expert e is
  // floor(c x cumulative tokens / tokens) differences (they sum to c over the groups).
  int64_t cum_before = 0;
  for (size_t j = 0; j < group_tokens.size(); ++j) {
    const int64_t cum = cum_before + group_tokens[j];
    const int32_t node = group_node[j];
    for (int32_t e = 0; e < num_experts; ++e) {
      const auto c = static_cast<__int128>(expert_totals[e]);
      const int64_t part = static_cast<int64_t>(c * cum / tokens - c * cum_before / tokens);
      if (part == 0) continue;
      const std::span<const int32_t> gpus = placement.replicas(e);
      if (gpus.size() == 1) {
        gpu_load_[gpus[0]] += part;
        dst[gpus[0]] += static_cast<int32_t>(part);
        slot_loads_[slot_offsets_[e]] += part;
        if (placement.node_of(gpus[0]) == node) local_totals[gpus[0]] += part;
        continue;
      }
      candidates_.clear();
      for (size_t i = 0; i < gpus.size(); ++i) {
        if (placement.node_of(gpus[i]) == node) candidates_.push_back(static_cast<int32_t>(i));
      }
      const bool local = !candidates_.empty();
      if (!local) {
        for (size_t i = 0; i < gpus.size(); ++i) candidates_.push_back(static_cast<int32_t>(i));
      }
      if (local) {
        for (int32_t i : candidates_) before_[i] = dst[gpus[i]];
      }
      water_fill(part, e, placement, dst);
      if (local) {
        for (int32_t i : candidates_) local_totals[gpus[i]] += dst[gpus[i]] - before_[i];
      }
    }
    cum_before = cum;
  }
  dst_totals.assign(dst_scratch_.begin(), dst_scratch_.end());
}

}  // namespace moesim::sim

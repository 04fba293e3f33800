#include "sim/network/node_limited_routing.h"

#include "base/check.h"

namespace moesim::sim {

double open_fraction(int32_t num_groups, int32_t topk_groups, int32_t groups_on_node) {
  MOESIM_CHECK(topk_groups >= 1 && topk_groups <= num_groups, "1 <= topk_groups <= num_groups");
  MOESIM_CHECK(groups_on_node >= 0 && groups_on_node <= num_groups, "groups on a node in range");
  // C(G - h, m) / C(G, m) = prod_{i < m} (G - h - i) / (G - i).
  double none_kept = 1.0;
  for (int32_t i = 0; i < topk_groups; ++i) {
    const int32_t left = num_groups - groups_on_node - i;
    if (left <= 0) return 1.0;
    none_kept *= static_cast<double>(left) / static_cast<double>(num_groups - i);
  }
  return 1.0 - none_kept;
}

void fill_node_limit(const Topology& topology, std::span<const GpuId> participants,
                     std::span<const int32_t> participant_of_expert, int32_t num_groups,
                     int32_t topk_groups, int32_t top_k, std::vector<int32_t>& scratch,
                     NodeLimit& out) {
  const auto num_experts = static_cast<int32_t>(participant_of_expert.size());
  MOESIM_CHECK(num_groups >= 1 && num_experts % num_groups == 0, "groups must divide the experts");
  MOESIM_CHECK(topk_groups >= 1 && topk_groups <= num_groups, "1 <= topk_groups <= num_groups");
  if (topk_groups == num_groups) {
    out.open_fraction.clear();
    out.guaranteed_share.clear();
    out.extra_share = 1.0;
    return;
  }
  const int32_t num_nodes = topology.num_nodes();
  const int32_t per_group = num_experts / num_groups;
  // scratch: per group, the node of its experts (-2 several); then per node, the number of
  // groups with an expert on it, its experts, and the last split group seen.
  scratch.assign(static_cast<size_t>(num_groups) + 3 * static_cast<size_t>(num_nodes), -1);
  int32_t* group_node = scratch.data();
  int32_t* groups_on = group_node + num_groups;
  int32_t* experts_on = groups_on + num_nodes;
  int32_t* last_group = experts_on + num_nodes;
  for (int32_t n = 0; n < num_nodes; ++n) groups_on[n] = experts_on[n] = 0;
  for (int32_t g = 0; g < num_groups; ++g) {
    // Nodes this group touches: counted once per (group, node).
    int32_t first_node = -1;
    bool split = false;
    for (int32_t e = g * per_group; e < (g + 1) * per_group; ++e) {
      const int32_t idx = participant_of_expert[e];
      MOESIM_CHECK(idx >= 0 && idx < static_cast<int32_t>(participants.size()),
                   "expert placed outside the participants");
      const int32_t node = topology.node_of(participants[idx]).value;
      experts_on[node]++;
      if (first_node < 0) first_node = node;
      split |= node != first_node;
    }
    group_node[g] = split ? -2 : first_node;
  }
  for (int32_t g = 0; g < num_groups; ++g) {
    if (group_node[g] >= 0) {
      groups_on[group_node[g]]++;
      continue;
    }
    // A split group: every node it touches counts it once.
    for (int32_t e = g * per_group; e < (g + 1) * per_group; ++e) {
      const int32_t n = topology.node_of(participants[participant_of_expert[e]]).value;
      if (last_group[n] == g) continue;
      last_group[n] = g;
      groups_on[n]++;
    }
  }
  const bool guaranteed = top_k >= topk_groups;
  out.open_fraction.resize(num_nodes);
  out.guaranteed_share.resize(num_nodes);
  out.extra_share = guaranteed ? static_cast<double>(top_k - topk_groups) / top_k : 1.0;
  for (int32_t n = 0; n < num_nodes; ++n) {
    // A node without experts is never a destination: any value serves.
    out.open_fraction[n] =
        groups_on[n] > 0 ? open_fraction(num_groups, topk_groups, groups_on[n]) : 1.0;
    out.guaranteed_share[n] =
        guaranteed && groups_on[n] > 0
            ? static_cast<double>(experts_on[n]) / (static_cast<double>(groups_on[n]) * per_group)
            : 0.0;
  }
}

NodeLimit node_limit_for_groups(const Topology& topology, std::span<const GpuId> participants,
                                std::span<const int32_t> participant_of_expert, int32_t num_groups,
                                int32_t topk_groups, int32_t top_k) {
  NodeLimit out;
  std::vector<int32_t> scratch;
  fill_node_limit(topology, participants, participant_of_expert, num_groups, topk_groups, top_k,
                  scratch, out);
  return out;
}

}  // namespace moesim::sim

// Node-limited (group-limited) routing in the unique (token, node) estimate of hierarchical
// dispatch.
//
// DeepSeek-V3 keeps the top m of G expert groups per token and picks its top-k experts among
// them, so a token reaches at most m groups; the independent-GPU estimate of traffic_matrix.h
// ignores this and overstates the (token, node) pairs. NodeLimit holds, per node, the chance
// that a token keeps one of its groups (a_n) and the node's share of those groups' experts
// (f_n); the estimate combines them with each GPU's reach and is bounded like every other.
// docs/network.md ("Node-limited routing") has the formula and its measured error.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/core/ids.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

struct NodeLimit {
  std::vector<double> open_fraction;     // per topology node, in (0, 1]; empty = unlimited
  std::vector<double> guaranteed_share;  // per topology node, in [0, 1]
  double extra_share = 1.0;              // in [0, 1]

  bool empty() const { return open_fraction.empty(); }
};

// The NodeLimit of a router with `num_groups` groups of contiguous experts keeping `topk_groups`
// of them and `top_k` experts, for experts placed as participant_of_expert[e] (an index into
// `participants`, GPUs of `topology`). Preconditions (checked): 1 <= topk_groups <= num_groups,
// num_groups divides the number of experts, every index valid. Returns an empty NodeLimit when
// topk_groups == num_groups (no limit).
NodeLimit node_limit_for_groups(const Topology& topology, std::span<const GpuId> participants,
                                std::span<const int32_t> participant_of_expert, int32_t num_groups,
                                int32_t topk_groups, int32_t top_k);

// As above, writing into `out` and reusing its storage (the step model's hot path).
void fill_node_limit(const Topology& topology, std::span<const GpuId> participants,
                     std::span<const int32_t> participant_of_expert, int32_t num_groups,
                     int32_t topk_groups, int32_t top_k, std::vector<int32_t>& scratch,
                     NodeLimit& out);

// 1 - C(num_groups - groups_on_node, topk) / C(num_groups, topk).
double open_fraction(int32_t num_groups, int32_t topk_groups, int32_t groups_on_node);

// The limited estimate of the file comment, in tokens, for one (source, node): tokens_src = T_s,
// open = a_n, guaranteed = f_n, extras_miss = prod_d (1 - min(1, rho_d extra_share)),
// max_tokens = max_d t_d, sum_tokens = sum_d t_d.
inline double limited_unique_tokens(double tokens_src, double open, double guaranteed,
                                    double extras_miss, double max_tokens, double sum_tokens) {
  const double u = tokens_src * open * (1.0 - (1.0 - guaranteed) * extras_miss);
  return std::clamp(u, max_tokens, std::min(tokens_src, sum_tokens));
}

// 1 - min(1, t / (T a) x extra_share): one factor of extras_miss.
inline double extras_miss_factor(double tokens, double tokens_src, double open,
                                 double extra_share) {
  return 1.0 - std::min(1.0, tokens / (tokens_src * open) * extra_share);
}

}  // namespace moesim::sim

// Node-limited (group-limited) routing in the unique (token, node) estimate of hierarchical
// dispatch.
//
// DeepSeek-V3's router scores its experts, splits them into G groups (contiguous expert ranges),
// keeps the top m groups of each token (group score: the sum of its top-2 expert scores) and takes
// the top-k experts among them. With k >= m every kept group receives at least one of the token's
// experts (the group's best expert outranks the rest of the kept experts unless another kept group
// holds k of them; measured: 99.6% of kept groups at G = 8, m = 4, k = 8), so a token reaches at
// most m groups, and a node holding whole groups is reached exactly when one of its groups is kept.
// The independent-GPU estimate of traffic_matrix.h ignores this and overstates the unique
// (token, node) pairs: +15% at 4 nodes, +33% at 8 (G = 8, m = 4, uniform scores).
//
// NodeLimit holds, per topology node n:
//   open_fraction[n] = a_n = 1 - C(G - h_n, m) / C(G, m), the probability that a token keeps one
//     of the h_n groups with an expert on n (groups kept uniformly at random: balanced routing);
//   guaranteed_share[n] = f_n, the chance that a kept group's guaranteed expert lands on n: the
//     node's share of the experts of the groups it touches (1 when it holds whole groups only);
//     0 when k < m (no expert is guaranteed);
// and extra_share = (k - m) / k (1 when k < m), the share of a token's selections beyond the one
// guaranteed per kept group.
// The estimate of tokens of source s reaching node n, given T_s tokens and t_d of them reaching
// each GPU d of n (the same inputs as the independent estimate), with rho_d = t_d / (T_s a_n) the
// GPU's reach given that the node is open:
//   u = T_s a_n (1 - (1 - f_n) prod_d (1 - min(1, rho_d extra_share)))
// (the node is reached by the kept group's guaranteed expert, or by one of the extra selections,
// GPUs independent given that the node is open; whole groups: u = T_s a_n), then bounded to
// [max_d t_d, min(T_s, sum_d t_d)], the bounds every estimate must respect (a hot expert reached
// by more tokens than a_n is kept at its own count).
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

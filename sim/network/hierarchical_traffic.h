// Internal to the network module: the hierarchical dispatch rule of traffic_matrix.h as a
// sequence of additions, shared by the builders (which add bytes straight into a TrafficMatrix)
// and TrafficPlan (which records the additions once and materialises them per row size).
//
// for_each_hierarchical_addition() calls emit(from_idx, to_idx, tokens) once per addition, in
// one fixed order; the collective's bytes are the sums, in that order, of tokens x the row size
// per entry (from, to) for dispatch and (to, from) for combine. `tokens` is a token count, or
// the unique (token, node) estimate of a relay row. Keeping one definition of the order is what
// makes every consumer's doubles equal bit for bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/check.h"
#include "sim/network/traffic_matrix.h"

namespace moesim::sim {

// Checks the shapes of `counts` (P x P tokens, P sources, P x num_nodes unique counts when
// given) and that its participants are GPUs of `topology`; aborts otherwise (a caller's bug).
void check_token_counts(const TokenCounts& counts, const Topology& topology);

namespace hierarchical_internal {

// Node-limited unique (token, node) estimate (node_limited_routing.h) of the tokens row[d] of a
// source with tokens_src tokens over the destinations d in [first, last) of one node.
template <typename TokensAt>
double node_limited_estimate(const NodeLimit& limit, int32_t node, double tokens_src, int32_t first,
                             int32_t last, TokensAt&& tokens_at) {
  const double open = limit.open_fraction[node];
  double extras_miss = 1.0, max_tokens = 0.0, sum_tokens = 0.0;
  for (int32_t d = first; d < last; ++d) {
    const int64_t n = tokens_at(d);
    if (n <= 0) continue;
    const auto t = static_cast<double>(n);
    extras_miss *= extras_miss_factor(t, tokens_src, open, limit.extra_share);
    max_tokens = std::max(max_tokens, t);
    sum_tokens += t;
  }
  return limited_unique_tokens(tokens_src, open, limit.guaranteed_share[node], extras_miss,
                               max_tokens, sum_tokens);
}

// Whether the participants are whole nodes of consecutive GpuIds in order.
inline bool whole_consecutive_nodes(const Topology& topology, const TokenCounts& counts) {
  const int32_t p = counts.size();
  const int32_t gpn = topology.gpus_per_node();
  if (p == 0 || p % gpn != 0 || counts.gpus[0].value % gpn != 0) return false;
  for (int32_t i = 1; i < p; ++i) {
    if (counts.gpus[i].value != counts.gpus[0].value + i) return false;
  }
  return true;
}

// Participants that are whole nodes of consecutive GpuIds (the usual EP group): node by node
// without lookup tables. For one source every addition goes to a distinct entry, and sources are
// visited in order, so every entry receives the same additions in the same order as in
// general_additions(). Calls emit(from_idx, to_idx, tokens, keep) per candidate addition, with
// keep false for those that general_additions() would not make, so that a recorder can stay
// branch-free (token counts are often zero or not at random).
template <typename EmitIf>
void whole_node_additions(const Topology& topology, const TokenCounts& counts, EmitIf&& emit) {
  const int32_t p = counts.size();
  const int32_t gpn = topology.gpus_per_node();
  const int32_t first_node = counts.gpus[0].value / gpn;
  const int32_t num_local_nodes = p / gpn;
  const int32_t num_nodes = topology.num_nodes();
  bool too_many_tokens = false;
  for (int32_t s = 0; s < p; ++s) {
    const int32_t src_local_node = s / gpn;
    const int32_t src_rail = s % gpn;
    const int64_t* row = &counts.tokens[static_cast<size_t>(s) * p];
    const int64_t tokens_per_src = counts.tokens_per_src[s];
    const double tokens_src = static_cast<double>(tokens_per_src);
    for (int32_t n = 0; n < num_local_nodes; ++n) {
      const int32_t first = n * gpn;
      if (n == src_local_node) {
        for (int32_t d = first; d < first + gpn; ++d) {
          emit(s, d, static_cast<double>(row[d]), row[d] > 0);
        }
        continue;
      }
      const int32_t relay = first + src_rail;
      double not_reached = 1.0;  // prod over d in node of (1 - tokens / T)
      bool has_dst = false;
      for (int32_t d = first; d < first + gpn; ++d) {
        const int64_t n_tokens = row[d];
        const bool reached = n_tokens > 0;
        too_many_tokens |= reached & (n_tokens > tokens_per_src);
        has_dst |= reached;
        if (reached) not_reached *= 1.0 - static_cast<double>(n_tokens) / tokens_src;
        emit(relay, d, static_cast<double>(n_tokens), reached & (relay != d));
      }
      MOESIM_CHECK(!too_many_tokens, "tokens(s, d) exceeds tokens_per_src(s)");
      if (!has_dst) continue;
      double unique_tokens = 0;
      if (!counts.unique_node_tokens.empty()) {
        unique_tokens = static_cast<double>(
            counts.unique_node_tokens[static_cast<size_t>(s) * num_nodes + first_node + n]);
      } else if (!counts.node_limit.empty()) {
        unique_tokens = node_limited_estimate(counts.node_limit, first_node + n, tokens_src, first,
                                              first + gpn, [&](int32_t d) { return row[d]; });
      } else {
        unique_tokens = tokens_src * (1.0 - not_reached);
      }
      emit(s, relay, unique_tokens, true);
    }
  }
}

// Any participant set (checked: every relay is a participant).
template <typename Emit>
void general_additions(const Topology& topology, const TokenCounts& counts, Emit&& emit) {
  const int32_t p = counts.size();
  const int32_t num_nodes = topology.num_nodes();
  // Participant index of the GPU at (node, rail), or -1.
  std::vector<int32_t> idx_at(static_cast<size_t>(topology.num_gpus()), -1);
  for (int32_t i = 0; i < p; ++i) idx_at[counts.gpus[i].value] = i;
  std::vector<double> not_reached(num_nodes);  // prod over d in node of (1 - tokens / T)
  std::vector<uint8_t> has_dst(num_nodes);
  for (int32_t s = 0; s < p; ++s) {
    const GpuId src = counts.gpus[s];
    const int32_t src_node = topology.node_of(src).value;
    const int32_t src_rail = topology.rail_of(src);
    const double tokens_src = static_cast<double>(counts.tokens_per_src[s]);
    std::fill(not_reached.begin(), not_reached.end(), 1.0);
    std::fill(has_dst.begin(), has_dst.end(), 0);
    for (int32_t d = 0; d < p; ++d) {
      const int64_t n = counts.at(s, d);
      if (n <= 0) continue;
      const int32_t dst_node = topology.node_of(counts.gpus[d]).value;
      if (dst_node == src_node) {
        emit(s, d, static_cast<double>(n));
        continue;
      }
      MOESIM_CHECK(n <= counts.tokens_per_src[s], "tokens(s, d) exceeds tokens_per_src(s)");
      has_dst[dst_node] = 1;
      not_reached[dst_node] *= 1.0 - static_cast<double>(n) / tokens_src;
      const int32_t relay = idx_at[dst_node * topology.gpus_per_node() + src_rail];
      MOESIM_CHECK(relay >= 0, "hierarchical: the relay GPU is not a participant");
      if (relay != d) emit(relay, d, static_cast<double>(n));
    }
    for (int32_t node = 0; node < num_nodes; ++node) {
      if (!has_dst[node]) continue;
      double unique_tokens = 0;
      if (!counts.unique_node_tokens.empty()) {
        unique_tokens = static_cast<double>(
            counts.unique_node_tokens[static_cast<size_t>(s) * num_nodes + node]);
      } else if (!counts.node_limit.empty()) {
        // The node's participants, in participant order.
        unique_tokens = node_limited_estimate(
            counts.node_limit, node, tokens_src, 0, p, [&](int32_t d) -> int64_t {
              return topology.node_of(counts.gpus[d]).value == node ? counts.at(s, d) : 0;
            });
      } else {
        unique_tokens = tokens_src * (1.0 - not_reached[node]);
      }
      const int32_t relay = idx_at[node * topology.gpus_per_node() + src_rail];
      emit(s, relay, unique_tokens);
    }
  }
}

// Every addition of the hierarchical rule for `counts`, in order (see the file comment).
template <typename Emit>
void for_each_hierarchical_addition(const Topology& topology, const TokenCounts& counts,
                                    Emit&& emit) {
  if (whole_consecutive_nodes(topology, counts)) {
    whole_node_additions(topology, counts,
                         [&](int32_t from_idx, int32_t to_idx, double tokens, bool keep) {
                           if (keep) emit(from_idx, to_idx, tokens);
                         });
  } else {
    general_additions(topology, counts, emit);
  }
}

}  // namespace hierarchical_internal
}  // namespace moesim::sim

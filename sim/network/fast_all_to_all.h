// FastAllToAll: a MoE layer's dispatch and combine times from per-GPU sums, without the
// (source, destination) matrix: the network half of the fast fidelity.
//
// It assumes product-form token counts, tokens(s, d) = T_s x reach_d, under which every link
// load is a per-GPU factor times a per-group sum (domain, leaf, rail, (leaf, rail)), so a layer
// costs O(participants). The collective ends when its most loaded link drains (the bound of
// bottleneck_model.h), spine traffic spread evenly as in factored_bottleneck_model.h. valid()
// says where it applies and why_not() why not; the caller then uses the exact fidelity.
// docs/fast_fidelity.md ("Collectives") has the product form and every link's formula.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/core/ids.h"
#include "sim/network/node_limited_routing.h"
#include "sim/network/traffic_matrix.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

class FastAllToAll {
 public:
  // `topology` must outlive the object; `participants` are the collective's GPUs.
  FastAllToAll(const Topology& topology, std::vector<GpuId> participants,
               DispatchAlgorithm algorithm);

  bool valid() const { return why_not_.empty(); }
  // Empty when valid(); otherwise the condition that failed.
  const std::string& why_not() const { return why_not_; }
  int32_t size() const { return static_cast<int32_t>(participants_.size()); }

  // Node-limited routing for the following load()s of hierarchical dispatch (per topology node,
  // as TokenCounts::node_limit; empty: the independent estimate). Direct dispatch ignores it.
  void set_node_limit(const NodeLimit& limit) { node_limit_ = limit; }

  // Token loads of one layer's dispatch from the sources' tokens and the destinations' reach (both
  // one entry per participant, >= 0; reach <= 1 except for low-latency dispatch, whose reach is
  // rows per source token). Precondition: valid().
  void load(std::span<const double> tokens, std::span<const double> reach);
  // The same with a destination's reach from sources in its own NVLink domain (`local_reach`)
  // and from the others (`remote_reach`): tokens(s, d) = T_s x local_reach_d when s and d share
  // a domain, T_s x remote_reach_d otherwise (replicated experts, whose replicas serve their own
  // node's sources first). load(tokens, r) is load(tokens, r, r).
  void load(std::span<const double> tokens, std::span<const double> local_reach,
            std::span<const double> remote_reach);
  // Seconds of the last load()'s dispatch / combine with rows of `bytes_per_token` bytes.
  double dispatch_seconds(double bytes_per_token) const;
  double combine_seconds(double bytes_per_token) const;
  // Both in one pass over the loads (the same figures as the two calls above).
  struct Seconds {
    double dispatch = 0, combine = 0;
  };
  Seconds both_seconds(double dispatch_bytes_per_token, double combine_bytes_per_token) const;
  // Tokens sent over links (NVLink and network) by the last load(): bytes = this x row bytes.
  double total_tokens() const { return total_tokens_; }

  // Host-link contention (StepInput's NIC slowdown): per participant, factors >= 1 by which
  // the time per byte of its NIC link in / out grows in the following *_seconds(); empty: none.
  void set_nic_slowdown(std::span<const double> in, std::span<const double> out);
  // Adds each participant's network bytes in / out (through its NIC) of the last load()'s
  // dispatch (or, `combine`, its combine) with rows of `bytes_per_token` bytes to `in` / `out`.
  void add_nic_bytes(double bytes_per_token, bool combine, std::span<double> in,
                     std::span<double> out) const;

 private:
  void check_routes();
  void group_participants();
  void load_direct(std::span<const double> tokens, std::span<const double> local,
                   std::span<const double> remote);
  void load_hierarchical(std::span<const double> tokens, std::span<const double> local,
                         std::span<const double> remote);
  // Hierarchical dispatch's sums of the sources' tokens (dom_tokens_, rail_tokens_,
  // leaf_rail_tokens_, all_tokens_) and the per-participant terms made of them alone, recomputed
  // only when `tokens` differ from the last call's (a step's MoE layers share their tokens).
  void cache_token_sums(std::span<const double> tokens);
  // The last load()'s largest loads per kind, NIC ones per latency class (through a spine or
  // not): both_seconds() reads them where every participant's links are alike (uniform_links_).
  struct MaxLoads {
    double nv_out = 0, nv_in = 0, net_out_spine = 0, net_out_leaf = 0, net_in_spine = 0,
           net_in_leaf = 0;
  };
  // What a load pass sums over the participants: the tokens sent and the largest loads.
  struct LoadSums {
    double total = 0;
    MaxLoads max;
  };
  // Participant i's loads: clears its spine residue, stores them, adds to its leaf's spine sums
  // (load() zeroes them first) and to `sums`.
  void finish_participant(int32_t i, double nv_out, double nv_in, double net_out, double net_in,
                          double spine_out, double spine_in, LoadSums& sums);
  // The latest link drain plus latency, reading outbound sums as `out` and inbound as `in`.
  double seconds(double bytes_per_token, bool transposed) const;

  const Topology& topology_;
  std::vector<GpuId> participants_;
  DispatchAlgorithm algorithm_;
  std::string why_not_;

  // Per participant: its NVLink / NIC link ids (-1 when absent), dense group indices.
  std::vector<int32_t> nvlink_up_, nvlink_down_, nic_up_, nic_down_;
  std::vector<int32_t> dom_, leaf_, leaf_dom_, rail_, leaf_rail_;
  int32_t num_doms_ = 0, num_leaves_ = 0, num_leaf_doms_ = 0, num_leaf_rails_ = 0;
  int32_t num_rails_ = 0;
  // (leaf, rail) groups by the sequence of nodes (dense NVLink domains) of their participants, in
  // participant order: groups with the same sequence sum the same node reaches in the same order,
  // so one sum serves them all (a rail-optimised node has one GPU on each rail of its leaves).
  // Participant i's group sums to distinct_sums_[distinct_of_[i]]; distinct sequence c is
  // distinct_doms_[distinct_begin_[c], distinct_begin_[c + 1]).
  std::vector<int32_t> distinct_of_, distinct_doms_, distinct_begin_;
  std::vector<double> distinct_sums_;
  // Per dense leaf: its spine up / down links' inverse capacities (seconds per byte) and counts.
  std::vector<double> leaf_up_inv_cap_, leaf_down_inv_cap_;
  std::vector<int32_t> leaf_up_links_, leaf_down_links_;
  // Seconds per byte of link `l` (a topology link id).
  double inv_cap(size_t l) const { return 1.0 / topology_.links()[l].capacity_bytes_per_s; }
  // Per participant: inv_cap() of its NVLink up / down and NIC up / down links (0 when absent).
  std::vector<double> nv_up_inv_, nv_down_inv_, nic_up_inv_, nic_down_inv_;
  double nvlink_latency_s_ = 0, leaf_latency_s_ = 0, spine_latency_s_ = 0;
  std::vector<double> nic_in_slowdown_, nic_out_slowdown_;  // per participant; empty: none

  // Per-layer sums (tokens).
  std::vector<double> dom_local_, dom_reach_, dom_tokens_, leaf_reach_, leaf_tokens_,
      leaf_dom_reach_, leaf_dom_tokens_, rail_tokens_, leaf_rail_tokens_, node_reach_;
  std::vector<double> nv_out_, nv_in_, net_out_, net_in_, spine_out_, spine_in_;
  std::vector<double> leaf_up_tokens_, leaf_down_tokens_;
  double total_tokens_ = 0;
  // cache_token_sums()'s tokens and, per participant, max(0, x) of: its rail's tokens less its
  // own; its node's less its own; the other rails' tokens outside its node; its rail's tokens
  // outside its leaf.
  std::vector<double> cached_tokens_;  // empty: none yet
  double all_tokens_ = 0;
  std::vector<double> rail_rest_, node_rest_, other_rails_rest_, rail_off_leaf_;
  MaxLoads max_loads_;  // the last load()'s
  bool uniform_links_ = false;
  NodeLimit node_limit_;
  std::vector<double> node_max_reach_, node_sum_reach_;
};

}  // namespace moesim::sim

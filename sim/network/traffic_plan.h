// TrafficPlan: one MoE layer's dispatch and combine traffic from one pass over its token counts.
//
// Dispatch and combine move the same (token, GPU) pairs with different row sizes, so build()
// applies the dispatch rule once and records its additions in order; dispatch_traffic() and
// combine_traffic() replay them with their row bytes: the same doubles as
// build_dispatch_traffic() / build_combine_traffic(), bit for bit. Hierarchical matrices of
// whole nodes carry their row support (docs/network.md, "One plan per layer").
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/ids.h"
#include "sim/network/traffic_matrix.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

class TrafficPlan {
 public:
  // Records the additions of `counts` for `algorithm`; preconditions (checked) as for
  // build_dispatch_traffic(). Reuses storage.
  void build(const Topology& topology, const TokenCounts& counts, DispatchAlgorithm algorithm);

  // Writes into `out` (reset to the participants of the last build()) the dispatch / combine
  // bytes of the last build()'s counts with rows of `bytes_per_token` (>= 0, checked) each.
  void dispatch_traffic(double bytes_per_token, TrafficMatrix& out) const;
  void combine_traffic(double bytes_per_token, TrafficMatrix& out) const;

  // Additions recorded by the last build() (hierarchical; 0 for direct).
  int64_t num_additions() const { return num_additions_; }

 private:
  template <bool kCombine>
  void materialise(double bytes_per_token, TrafficMatrix& out) const;
  // Sets support_begin_ / support_cols_ for whole nodes of consecutive GpuIds, or clears them.
  void build_support(const Topology& topology, bool whole_nodes);

  std::vector<GpuId> gpus_;
  DispatchAlgorithm algorithm_ = DispatchAlgorithm::kDirect;
  // Direct: tokens_[s * P + d], the counts as doubles. Hierarchical: addition i adds
  // tokens_[i] x row bytes to dispatch entry entry_[i] = from * P + to, and to combine entry
  // transposed_entry_[i] = to * P + from; num_additions_ of them.
  std::vector<int32_t> entry_;
  std::vector<int32_t> transposed_entry_;
  std::vector<double> tokens_;
  int64_t num_additions_ = 0;
  // Row support (hierarchical, whole nodes; see the file comment), built for support_gpus_ and
  // support_gpus_per_node_; has_support_ false otherwise.
  bool has_support_ = false;
  std::vector<GpuId> support_gpus_;
  int32_t support_gpus_per_node_ = 0;
  std::vector<int32_t> support_begin_;
  std::vector<int32_t> support_cols_;
};

}  // namespace moesim::sim

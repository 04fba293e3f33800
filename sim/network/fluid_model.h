// "fluid": max-min fair fluid sharing of the topology's links by the collective's flows.
//
// Every flow (one per ordered pair with bytes) is idle for its route latency, then shares the
// links of its route max-min fairly with the other transferring flows; rates are recomputed
// whenever a flow starts or finishes (MaxMinFluid). A flow's finish time is when its last byte
// has been transferred; send/recv completion and the duration follow as in NetworkModel. This is
// the model SimGrid's CM02 solves (with equal sharing weights; CM02 weights a flow's share by the
// inverse of its route latency, see docs/network.md), at a fraction of its cost.
#pragma once

#include <string_view>
#include <vector>

#include "sim/network/max_min_fluid.h"
#include "sim/network/network_model.h"

namespace moesim::sim {

class FluidModel final : public NetworkModel {
 public:
  // `topology` must outlive the model.
  explicit FluidModel(const Topology& topology);

  std::string_view name() const override { return "fluid"; }
  void run(const TrafficMatrix& traffic, CollectiveResult& result) override;
  using NetworkModel::run;
  bool set_link_slowdown(std::span<const double> factor_per_link) override;
  std::span<const double> link_bytes() const override { return link_bytes_; }

 private:
  const Topology& topology_;
  std::vector<double> capacity_bytes_per_s_;  // of the topology
  std::vector<double> run_capacity_;          // divided by set_link_slowdown()'s factors
  std::vector<double> link_bytes_;
  std::vector<std::pair<int32_t, int32_t>> flow_pairs_;  // (src_idx, dst_idx) per flow
  MaxMinFluid solver_;
};

}  // namespace moesim::sim

// "bottleneck_factored": the link-load bound of bottleneck_model.h with the leaf <-> spine loads
// factored, an opt-in approximation for large collectives (1,024 GPUs in a few milliseconds).
//
// The exact model charges every pair's bytes to the spine its route takes (a function of the
// pair, topology.h), so its leaf -> spine and spine -> leaf loads need every
// pair's route class. This model keeps every other link exact and spreads inter-leaf traffic
// evenly over the spines, the average of what the topology's balanced routing does:
//   per participant s: nvlink_out(s) (bytes to its own NVLink domain), network_out(s) (to other
//     domains), leaf_out(s) (to other domains under its own leaf, routed GPU -> leaf -> GPU);
//     per destination the same three inbound sums;
//   NVLink link out of s: nvlink_out(s); NIC link out of s: network_out(s); and inbound alike;
//   each uplink of leaf A: sum over s under A of (network_out(s) - leaf_out(s)) / uplinks of A;
//   each downlink into leaf B: sum over d under B of (network_in(d) - leaf_in(d)) / its downlinks.
// One streaming pass over the matrix computes the sums (per row: a contiguous sum, a contiguous
// column accumulation, and a gather of the row's own domain and leaf); the link loads then take
// O(participants + links). No per-pair table: memory O(G x leaf size).
//
// Finish times, as in the exact model (finish = max link time on the route + route latency):
//   NVLink and same-leaf flows: per pair, exact given the loads (the flows are the row's own
//     domain and leaf entries, recorded in the pass);
//   flows through a spine: the source side (its NIC and its leaf's uplinks) is per GPU, the
//     destination side is taken as the latest over the GPUs that receive spine traffic and could
//     be its peers (not under its leaf, not in its domain), and symmetrically for receive
//     completion: the pass does not record which spine pairs carry bytes. Exact for dense
//     all-to-alls given the loads; for sparse ones (hierarchical dispatch) a GPU's send / receive
//     completion may be later than the exact model's. The duration (the latest flow) is exact
//     given the loads.
// So on a topology without spines (one NVLink domain, one leaf per rail, ...) or a traffic
// matrix without inter-leaf traffic, the result equals the exact model's (same sums in the same
// order on NVLink; bit for bit with integral bytes). docs/network.md gives the measured error.
//
// Applies when every route has one of the shapes [NVLink up, NVLink down] within a domain,
// [NIC up, NIC down] under one leaf, [NIC up, leaf -> spine, spine -> leaf, NIC down] otherwise,
// with one latency per shape (checked at construction), and the participants are increasing
// GpuIds. Otherwise run() delegates to the exact BottleneckModel (built on first need).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/network/network_model.h"

namespace moesim::sim {

class BottleneckModel;

class FactoredBottleneckModel final : public NetworkModel {
 public:
  // `topology` must outlive the model.
  explicit FactoredBottleneckModel(const Topology& topology);
  ~FactoredBottleneckModel() override;

  std::string_view name() const override { return "bottleneck_factored"; }
  void run(const TrafficMatrix& traffic, CollectiveResult& result) override;
  using NetworkModel::run;

  // Whether the topology has the route shapes above (else every run is the exact model's).
  bool factored() const { return factored_; }
  // Bytes routed over each link by the last factored run() (indexed by link id; empty after a
  // run delegated to the exact model).
  std::span<const double> link_bytes() const { return link_bytes_; }

 private:
  bool build_tables();
  // Recomputes the participant layout when the participants differ from the last run's; false
  // when they are not increasing GpuIds.
  bool set_participants(const std::vector<GpuId>& gpus);
  // The pass over the matrix: per-participant sums, flow counts and flags.
  void sum_traffic(const TrafficMatrix& traffic);
  // Link loads and times from the sums.
  void load_links();
  // send / receive completion per participant; returns the duration in seconds.
  double finish_times();

  const Topology& topology_;
  std::unique_ptr<BottleneckModel> exact_;  // fallback, built on first need
  bool factored_ = false;

  // Per topology GPU: its NVLink / NIC links (-1 when absent), its leaf index (-1 without one).
  std::vector<int32_t> nvlink_up_;
  std::vector<int32_t> nvlink_down_;
  std::vector<int32_t> nic_up_;
  std::vector<int32_t> nic_down_;
  std::vector<int32_t> leaf_idx_;
  // Per leaf: its uplinks (leaf -> spine) and downlinks (spine -> leaf).
  std::vector<std::vector<int32_t>> uplinks_;
  std::vector<std::vector<int32_t>> downlinks_;
  // Route latency of each shape, seconds (as the exact model converts them).
  double nvlink_latency_s_ = 0;
  double leaf_latency_s_ = 0;
  double spine_latency_s_ = 0;
  std::vector<double> inv_capacity_s_per_byte_;  // [link]

  // Participant layout (for participants_).
  std::vector<GpuId> participants_;
  std::vector<int32_t> domain_begin_;       // [idx]: first participant index of idx's domain
  std::vector<int32_t> domain_end_;         // [idx]: one past the last
  std::vector<int64_t> domain_flag_begin_;  // [idx]: offset of idx's row in domain_flow_
  // Same leaf, other domain: the participant indices of row idx are
  // leaf_peers_[leaf_begin_[idx] .. leaf_begin_[idx + 1]).
  std::vector<int32_t> leaf_peers_;
  std::vector<int64_t> leaf_begin_;

  // Per-run sums and counts, [idx].
  std::vector<double> nvlink_out_, network_out_, leaf_out_;
  std::vector<double> nvlink_in_, network_in_, leaf_in_;
  std::vector<int32_t> network_out_flows_, leaf_out_flows_;
  std::vector<int32_t> network_in_flows_, leaf_in_flows_;
  std::vector<uint8_t> domain_flow_;  // per (row, domain entry): bytes > 0 (0 on the diagonal)
  std::vector<uint8_t> leaf_flow_;    // per leaf_peers_ entry: bytes > 0
  int64_t num_flows_ = 0;
  // Link loads and times.
  std::vector<double> link_bytes_;
  std::vector<double> link_time_s_;
  std::vector<double> leaf_up_bytes_, leaf_down_bytes_;    // [leaf]
  std::vector<double> leaf_up_time_s_, leaf_down_time_s_;  // [leaf]: latest drain of its links
  std::vector<double> send_done_s_, recv_done_s_;
  // (source / destination side of spine flows, seconds; participant index).
  std::vector<std::pair<double, int32_t>> spine_src_, spine_dst_;
};

}  // namespace moesim::sim

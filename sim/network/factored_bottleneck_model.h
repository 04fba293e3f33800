// "bottleneck_factored": the link-load bound of bottleneck_model.h with the leaf <-> spine loads
// factored, an opt-in approximation for large collectives (1,024 GPUs in a few milliseconds).
//
// Every link but the leaf <-> spine ones is charged exactly; inter-leaf traffic is spread evenly
// over a leaf's spine links (the average of the topology's balanced routing), so one streaming
// pass over the matrix and O(participants + links) give the loads, with no per-pair table.
// Durations are exact given those loads; a GPU's completion through a spine may be later than
// the exact model's under sparse traffic, and without spine traffic the result is the exact
// model's. Other route shapes delegate to BottleneckModel. docs/network.md
// ("bottleneck_factored") has the sums, the finish times and the measured error.
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

// "bottleneck": the link-load bound, the network model of the simulator's hot path.
//
// For a collective with flows f (source, destination, bytes b_f, topology route R_f, route
// latency lat_f = Topology::route_latency_ns):
//   load_l   = sum of b_f over flows f with l in R_f          (every directed link counted)
//   t_l      = load_l / capacity_l
//   finish_f = lat_f + max over l in R_f of t_l
//   duration = max over f of finish_f = max over l of (t_l + max lat_f of the flows over l)
//   send_done(g) = max finish_f over flows from g; recv_done(g) = max over flows into g.
// It is a lower bound on any work-conserving schedule's transfer time plus the latency of the
// flow that determines it: each flow finishes when the busiest link on its route has drained.
// Counting every link in both directions matters: under skew the bottleneck is the receiving
// NIC (or NVLink port) of the popular GPU, not the senders'.
//
// Two implementations of the same arithmetic, bit for bit (same additions in the same order,
// maxima are exact in any order), tested against each other:
//  - run_reference(): per flow, walks its route (padded to the longest route with a dummy link)
//    and adds its bytes to every link; then per flow, the maximum link time on its route.
//    O(P^2 x hops) with 16 bytes of route and 8 of latency per (source, destination) pair.
//  - run() (the hot path), when the topology is "structured" (checked at construction: every
//    route between distinct GPUs is 2 to 4 links; its first link leaves the source and is one of
//    at most two egress links of that GPU (NVLink / NIC), its last link enters the destination
//    and is one of at most two ingress links, and the 0 to 2 links between them (leaf -> spine
//    -> leaf) are never first or last links; at most 64 distinct route latencies; fewer than
//    65,535 links) and the participants are consecutive GpuIds. Per pair it keeps one byte (egress
//    slot, ingress slot, latency class) and two 16-bit middle link ids. Ingress loads are column
//    sums accumulated row by row (vectorised), egress loads are the row's running sums, and only
//    pairs whose route has middle links touch per-link scatter. Every other case falls back to
//    run_reference().
// Memory for G topology GPUs: G^2 x 29 bytes (30 MB at 1,024 GPUs).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "sim/network/network_model.h"

namespace moesim::sim {

class BottleneckModel final : public NetworkModel {
 public:
  // `topology` must outlive the model.
  explicit BottleneckModel(const Topology& topology);

  std::string_view name() const override { return "bottleneck"; }
  void run(const TrafficMatrix& traffic, CollectiveResult& result) override;
  using NetworkModel::run;
  // The per-route computation (see the file comment); the same result as run(), bit for bit.
  void run_reference(const TrafficMatrix& traffic, CollectiveResult& result);

  // Bytes routed over each link by the last run() (indexed by link id).
  std::span<const double> link_bytes() const { return {link_bytes_.data(), num_links_}; }
  // Whether run() takes the structured path for participants that are consecutive GpuIds.
  bool structured() const { return structured_; }

 private:
  void build_structured_tables();
  // Fills result from link_bytes_, send_done_s_, recv_done_s_ and the duration.
  void finish_result(int32_t num_participants, int32_t num_flows, double duration_s,
                     CollectiveResult& result);

  const Topology& topology_;
  size_t num_links_ = 0;         // link id num_links_ is the dummy padding link
  int32_t max_route_links_ = 0;  // R
  // padded_routes_[(src * G + dst) * R + k]: k-th link of the route, or the dummy link.
  std::vector<int32_t> padded_routes_;
  std::vector<double> route_latency_s_;  // [src * G + dst]
  std::vector<double> inv_capacity_s_per_byte_;
  std::vector<double> capacity_bytes_per_s_;  // [link]
  std::vector<double> link_bytes_;
  std::vector<double> link_time_s_;
  std::vector<double> send_done_s_;
  std::vector<double> recv_done_s_;

  // Structured tables (valid when structured_).
  bool structured_ = false;
  // pair_code_[src * G + dst]: bit 0 egress slot, bit 1 ingress slot, bits 2-7 latency class.
  std::vector<uint8_t> pair_code_;
  // pair_mids_[src * G + dst]: middle links (low 16 bits first), the dummy link where absent.
  std::vector<uint32_t> pair_mids_;
  uint32_t no_mids_ = 0;                 // the code of a route without middle links
  std::vector<int32_t> egress_links_;    // [gpu * 2 + slot], dummy when unused
  std::vector<int32_t> ingress_links_;   // [gpu * 2 + slot]
  std::vector<double> latency_class_s_;  // [class]
  // run() scratch: destinations of row s's flows are flow_dst_[flow_begin_[s], flow_begin_[s+1]).
  std::vector<int32_t> flow_dst_;
  std::vector<int32_t> flow_begin_;
  // Links whose link_bytes_ / link_time_s_ the last run set (every link after run_reference()).
  std::vector<int32_t> touched_links_;
};

}  // namespace moesim::sim

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
// Three implementations of the same arithmetic, bit for bit, tested against each other:
//  - run_reference(): per flow, walks its route (Topology::route(), computed per pair) and adds
//    its bytes to every link, in (source, destination) order; then per flow, the maximum link
//    time on its route. O(P^2 x hops), no table.
//  - run() (the hot path), when the topology is "structured" (checked at construction: every
//    route between distinct GPUs is 2 to 4 links; its first link leaves the source, its last
//    link enters the destination, and the 0 to 2 links between them (leaf -> spine -> leaf) are
//    never first or last links; at most 255 route classes, below) and the participants are
//    consecutive GpuIds. A route class is the route seen from its ends: (index of the first link
//    among the source's first links, index of the second link among the source's second links,
//    the same two for the destination's last and second-to-last links, route latency), indices
//    in link id order; on a rail-optimised fat tree there are about num_spines + 2 classes. Per
//    pair the model keeps one byte (the class); per GPU and class, the two links on its side.
//    Then:
//      integral bytes (every entry an integer below 2^52, total below 2^52, e.g. token counts x
//        row bytes) and a dense first row (flows to at least half of the participants): sums
//        are exact in any order, so loads are summed per (source, class) and per (destination,
//        class) in one pass over the matrix (destinations in cache-sized blocks), and charged
//        to the links after. Finish times are max(source-side link times + latency,
//        destination-side link times + latency) per pair: the rounded addition is monotone, so
//        this is the reference's max(all link times) + latency exactly, and each side is a
//        table lookup by (GPU, class);
//      otherwise, every link receives its additions in (source, destination) order as in
//        run_reference() (a link is the first link of one GPU, the last link of one GPU or a
//        middle link, never two of these), over the rows' flows compacted first (from the row
//        support alone when the matrix carries one, see traffic_matrix.h), and finish times are
//        computed flow by flow.
//    Every other case falls back to run_reference().
// Memory: per window of P consecutive participants that a structured run has seen (a replica's
// GPUs), P^2 + 16 x P x (classes + 1) bytes, built on the window's first run and shared, read-only,
// by every model of one topology (fresh_copy(): the replicas of a run); so G GPUs in replicas of P
// take about G x P bytes (1 MB for 8 replicas of 128 GPUs), not G^2. Per link, 16 bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sim/network/bottleneck_tables.h"
#include "sim/network/network_model.h"

namespace moesim::sim {

class BottleneckModel final : public NetworkModel {
 public:
  // `topology` must outlive the model.
  explicit BottleneckModel(const Topology& topology);
  // A model sharing `tables` (built for `topology`).
  BottleneckModel(const Topology& topology, std::shared_ptr<BottleneckTables> tables);

  std::unique_ptr<NetworkModel> fresh_copy() const override;

  std::string_view name() const override { return "bottleneck"; }
  void run(const TrafficMatrix& traffic, CollectiveResult& result) override;
  using NetworkModel::run;
  // The per-route computation (see the file comment); the same result as run(), bit for bit.
  void run_reference(const TrafficMatrix& traffic, CollectiveResult& result);

  // Bytes routed over each link by the last run() (indexed by link id).
  // Empty before the first run().
  std::span<const double> link_bytes() const override {
    return link_bytes_.empty() ? std::span<const double>()
                               : std::span(link_bytes_.data(), num_links_);
  }
  bool set_link_slowdown(std::span<const double> factor_per_link) override;
  // Whether run() takes the structured path for all of the topology's GPUs, in order (builds
  // that window's tables: for tests of small topologies).
  bool structured();

 private:
  // link_bytes_ and link_time_s_ sized (once).
  void size_link_arrays();
  // Fills result from link_bytes_, send_done_s_, recv_done_s_ and the duration.
  void finish_result(int32_t num_participants, int32_t num_flows, double duration_s,
                     CollectiveResult& result);

  // The window of participants (base, count): its tables, built or found in tables_.
  const BottleneckWindow& window(int32_t base, int32_t count);

  const Topology& topology_;
  std::shared_ptr<BottleneckTables> tables_;
  // The tables' fields under the names the arithmetic uses (BottleneckTables documents them).
  const size_t num_links_;
  const std::vector<double>& inv_capacity_s_per_byte_;
  const std::vector<double>& capacity_bytes_per_s_;
  // The window of the last structured run (null before the first).
  std::shared_ptr<const BottleneckWindow> window_;
  std::vector<double> link_bytes_;
  std::vector<double> link_time_s_;
  double max_link_time_s_ = 0;  // over all links, as of the last set_link_times()
  // set_link_slowdown()'s factors per link (empty: none; the dummy link is never slowed).
  std::vector<double> slowdown_;
  std::vector<double> send_done_s_;
  std::vector<double> recv_done_s_;

  // Structured path (see the file comment).
  // Links this collective's flows can use (all participants' route-end links), zeroed at the
  // start of a run: recomputed when the participants change.
  void select_links(const BottleneckWindow& w);
  // Link loads from per-class sums; false (link loads unusable) when some entry is not integral,
  // the total reaches 2^52, or the first row has flows to fewer than half of the participants.
  bool load_links_by_class(const TrafficMatrix& traffic, const BottleneckWindow& w,
                           int32_t& num_flows);
  // After load_links_by_class(): send / receive completion per participant from link_time_s_
  // and flow_class_; returns the duration.
  double finish_times(const BottleneckWindow& w);
  // Link loads with every link's additions in (source, destination) order, then the finish times
  // flow by flow over the compacted flows; returns the duration.
  double run_ordered(const TrafficMatrix& traffic, const BottleneckWindow& w, int32_t& num_flows);
  // link_time_s_ of the touched links (and the dummy) from link_bytes_, and
  // max_link_time_s_.
  void set_link_times();

  // The window select_links() was last called for (null: none, or a reference run since).
  const BottleneckWindow* links_window_ = nullptr;
  // Links whose link_bytes_ / link_time_s_ the last run set (every link after run_reference()).
  std::vector<int32_t> touched_links_;
  std::vector<uint8_t> link_seen_;  // select_links() scratch
  // run() scratch.
  std::vector<uint8_t> flow_class_;  // [src_idx * P + dst_idx]: the pair's class, C if no flow
  std::vector<double> row_acc_;      // [class]: bytes / finish times of one row per class
  std::vector<double> col_acc_;      // [dst_idx * (C + 1) + class]
  // Ordered path: destinations of row s's flows are flow_dst_[flow_begin_[s], flow_begin_[s+1]).
  std::vector<int32_t> flow_dst_;
  std::vector<int32_t> flow_begin_;
};

}  // namespace moesim::sim

// "bottleneck": the link-load bound, the network model of the simulator's hot path.
//
// Each flow ends when the busiest link on its route has drained, plus its route latency; every
// directed link is counted, since under skew the bottleneck is the popular GPU's receiving NIC.
// Three implementations of the same arithmetic, bit for bit and tested against each other: a
// per-route reference and, on "structured" topologies, per-(GPU, route class) sums for integral
// bytes or compacted per-flow additions otherwise. Route-class tables are kept per window of
// consecutive participants and shared by replicas (fresh_copy()). docs/network.md
// ("bottleneck") has the formula, the route classes, the three paths and their memory.
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

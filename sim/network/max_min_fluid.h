// Max-min fair fluid sharing of capacitated links by flows, advanced event by event.
//
// Internal to sim/network (other modules include network_model.h); it knows links only as
// capacities and flows as (route, bytes, start delay). A flow is idle for its start delay (the
// route latency), then transfers at its max-min fair rate (progressive filling), recomputed only
// when the set of transferring flows changes: SimGrid's resource-model contract,
// next_event_delay_s() and advance(delta). docs/network.md ("fluid") has the cost per event and
// the tests.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace moesim::sim {

class MaxMinFluid {
 public:
  // Forgets all flows and sets the links: link_capacity_bytes_per_s[l] > 0 is the capacity of
  // link l. Time restarts at 0. Keeps allocated storage for reuse.
  void reset(std::span<const double> link_capacity_bytes_per_s);

  // Adds a flow that starts transferring at time start_delay_s >= 0 and needs `bytes` > 0 over
  // `route` (link ids, each < number of links, non-empty, no repeats). Returns its index
  // (0, 1, ... in order of addition). Precondition: no advance() since reset().
  int32_t add_flow(std::span<const int32_t> route, double bytes, double start_delay_s);

  // Seconds from now until the next flow starts or finishes; infinity when every flow is done.
  double next_event_delay_s();
  // Moves time forward by 0 <= delta_s <= next_event_delay_s(): every transferring flow moves
  // rate x delta_s bytes; flows with no bytes left finish at the new time, flows whose start
  // delay has elapsed start.
  void advance(double delta_s);
  // Runs advance(next_event_delay_s()) until every flow is done, or until the next event is
  // infinitely far (flows whose bytes / rate overflow a double, on links of absurdly small
  // capacity): those flows keep an infinite finish_time_s(), which the caller's duration check
  // refuses (network_model.h).
  void run_to_completion();

  double now_s() const { return now_s_; }
  bool done() const { return num_done_ == num_flows(); }
  int32_t num_flows() const { return static_cast<int32_t>(flow_bytes_.size()); }
  // Finish time of flow f in seconds, or infinity while it is not finished.
  double finish_time_s(int32_t f) const { return finish_s_[f]; }
  // Current max-min rate of flow f in bytes/s (0 unless transferring). Valid after
  // next_event_delay_s() (which computes rates when they are stale).
  double rate_bytes_per_s(int32_t f) const { return rate_[f]; }
  // Remaining bytes of flow f.
  double remaining_bytes(int32_t f) const { return remaining_[f]; }

  static constexpr double kInfinity = std::numeric_limits<double>::infinity();

 private:
  enum class State : uint8_t { kWaiting, kActive, kDone };
  void build_link_index();
  void compute_rates();

  double now_s_ = 0;
  int32_t num_done_ = 0;
  bool started_ = false;
  bool rates_stale_ = true;
  std::vector<double> capacity_;
  // Flows: route as CSR (route_begin_[f] .. route_begin_[f + 1] into route_links_).
  std::vector<int32_t> route_begin_{0};
  std::vector<int32_t> route_links_;
  std::vector<double> flow_bytes_;
  std::vector<double> start_s_;
  std::vector<double> remaining_;
  std::vector<double> rate_;
  std::vector<double> finish_s_;
  std::vector<State> state_;
  // Flows in start order that are still waiting: waiting_order_[next_waiting_ ..].
  std::vector<int32_t> waiting_order_;
  size_t next_waiting_ = 0;
  std::vector<int32_t> active_;
  // Link -> flows through it (CSR), built at the first event.
  std::vector<int32_t> link_begin_;
  std::vector<int32_t> link_flows_;
  // Scratch of compute_rates().
  std::vector<double> cap_left_;
  std::vector<int32_t> num_unfixed_;
  std::vector<uint8_t> fixed_;
  std::vector<std::pair<double, int32_t>> heap_;
};

}  // namespace moesim::sim

// The network module's public interface: a traffic matrix in, completion times out.
//
// A collective is the flows of one TrafficMatrix, all issued at time 0; it ends when its last
// flow ends, and every GPU waits at the barrier until then (the straggler effect). Models are
// chosen by name: "bottleneck" (the link-load bound, the hot path), "bottleneck_factored" (the
// same with leaf <-> spine loads spread evenly, an opt-in approximation for large collectives),
// "fluid" (max-min fair sharing) and "simgrid" (SimGrid 3.32, for validation; registered when
// the build has SimGrid). docs/network.md gives the formulas and their measured agreement.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/horizon.h"
#include "sim/core/time.h"
#include "sim/network/traffic_matrix.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// The outcome of one collective. Per-GPU vectors are indexed by participant index (as in the
// TrafficMatrix); times are from the collective's start.
struct CollectiveResult {
  // When the last flow ended (0 when no bytes cross the network).
  SimTime duration_ns = 0;
  // When the GPU's last outgoing / incoming flow ended (0 when it has none).
  std::vector<SimTime> send_done_ns;
  std::vector<SimTime> recv_done_ns;
  // Time the GPU waits at the collective's barrier: duration_ns - recv_done_ns. A GPU's own
  // completion is when it holds all its inputs (recv_done): its outgoing flows still in flight
  // are writes that occupy links, not the GPU. Under a hot expert every GPU but the hot one
  // waits here (the straggler effect); send_done_ns shows who is still sending.
  std::vector<SimTime> barrier_wait_ns;
  // The link with the largest bytes / capacity (the one that bounds the collective), -1 when no
  // bytes cross the network; its class, the bytes routed over it and its capacity.
  int32_t bottleneck_link = -1;
  LinkClass bottleneck_class = LinkClass::kNvlink;
  double bottleneck_bytes = 0;
  double bottleneck_capacity_bytes_per_s = 0;
  // Flows run (pairs with bytes > 0 between distinct participants).
  int32_t num_flows = 0;

  // bottleneck_bytes / duration: the bandwidth the bottleneck link achieved, bytes/s (0 when the
  // duration is 0). Comparable with "RDMA / NVLink bandwidth" figures of kernel benchmarks.
  double bottleneck_bytes_per_s() const {
    return duration_ns > 0 ? bottleneck_bytes / to_seconds(duration_ns) : 0.0;
  }
};

// The fixed cost of a collective kernel beyond what the network model prices (DeepEP's
// low-latency kernels: launch, synchronisation; a profile's [[network.kernel]] fit,
// docs/calibration.md): a model time t becomes fixed_s + t.
struct KernelCost {
  double fixed_s = 0;  // >= 0
  double seconds(double model_s) const { return fixed_s + model_s; }
  // Adds fixed_s to the duration and to every GPU's send / receive completion (each GPU runs the
  // kernel: all of them pay it); the barrier waits do not change. Nothing changes when 0.
  void apply(CollectiveResult& result) const;
};

class NetworkModel {
 public:
  virtual ~NetworkModel() = default;
  // The registry name ("bottleneck", "bottleneck_factored", "fluid", "simgrid").
  virtual std::string_view name() const = 0;
  // Runs one collective and overwrites `result` (its vectors are resized to traffic.size(), so
  // reusing one result avoids allocation). Precondition: every participant of `traffic` is a
  // GPU of the topology the model was made for.
  virtual void run(const TrafficMatrix& traffic, CollectiveResult& result) = 0;
  // A model of the same kind and topology in its initial state, sharing what this one derived
  // from the topology (a replica's model from the first replica's); null where the kind cannot
  // share (then make another through the registry).
  virtual std::unique_ptr<NetworkModel> fresh_copy() const { return nullptr; }

  // Host-link contention (the tiered KV cache's copies share GPUs' PCIe links with their NIC
  // traffic; docs/serving.md): per link id, a factor >= 1 by which the link's time per byte grows
  // in the following run()s; empty: none. Returns false, changing nothing, where the model cannot
  // apply it (then only an empty span is accepted).
  virtual bool set_link_slowdown(std::span<const double> factor_per_link) {
    return factor_per_link.empty();
  }
  // Bytes routed over each link by the last run(), indexed by link id (empty where the model
  // does not keep them).
  virtual std::span<const double> link_bytes() const { return {}; }

  CollectiveResult run(const TrafficMatrix& traffic) {
    CollectiveResult result;
    run(traffic, result);
    return result;
  }
};

// Network models by name. The topology passed to make() must outlive the model.
class NetworkModelRegistry {
 public:
  using Factory = std::function<std::unique_ptr<NetworkModel>(const Topology&)>;

  // A registry holding "bottleneck", "bottleneck_factored" and "fluid".
  NetworkModelRegistry();
  // Adds (or replaces) a model.
  void add(std::string name, Factory factory);
  // The model named `name` for `topology`. An unknown name throws ConfigError (file empty, key
  // path `key_path`) listing the valid names.
  std::unique_ptr<NetworkModel> make(std::string_view name, const Topology& topology,
                                     const std::string& key_path = "network.model") const;
  // Registered names, sorted.
  std::vector<std::string> names() const;

 private:
  std::vector<std::pair<std::string, Factory>> factories_;  // sorted by name
};

// Fills the bottleneck fields of `result` from per-link loads (bytes routed over each link):
// the link with the largest bytes / capacity, lowest id on ties. Shared by all models.
void set_bottleneck(const Topology& topology, std::span<const double> link_bytes,
                    CollectiveResult& result);
// Sets result.barrier_wait_ns = duration_ns - recv_done_ns per GPU.
void set_barrier_waits(CollectiveResult& result);

// Every model checks a collective's duration before rounding it (issue 19): one that is negative,
// not a number or beyond the horizon (sim/core/horizon.h) is bad input. Throws HorizonError
// naming the collective's bottleneck (the link with the largest bytes / capacity among
// `link_bytes`, bytes per link id; the topology's lowest-capacity link when `link_bytes` is
// empty), its load and capacity, and the topology.
[[noreturn]] void throw_collective_beyond_horizon(const Topology& topology,
                                                  std::span<const double> link_bytes,
                                                  double duration_s);
// `duration_s` rounded to nanoseconds (from_seconds), after that check.
inline SimTime collective_duration_ns(double duration_s, const Topology& topology,
                                      std::span<const double> link_bytes) {
  if (!within_horizon_s(duration_s)) [[unlikely]] {
    throw_collective_beyond_horizon(topology, link_bytes, duration_s);
  }
  return from_seconds(duration_s);
}

}  // namespace moesim::sim

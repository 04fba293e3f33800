// Network calibration: per link class, the efficiency (achieved / nominal bandwidth) and the
// fixed latency of measured all-to-alls, fitted against the simulator's own network model on the
// cluster's topology, and applied back to that topology's link capacities and latencies.
//
// Each sample's nominal transfer time x is the "bottleneck" model's duration of the same uniform
// all-to-all with every latency zero, and its bottleneck link gives the class ("nvlink" or
// "network"); per class, measured = latency + x / efficiency is fitted with op_fit.h's solver.
// Applied, the latency sits where every route of the class pays it once (half on each GPU's
// attachment link), since an NCCL all-to-all's fixed cost is software, not per-hop wire latency.
// docs/calibration.md ("Network calibration") has the inputs, the profile section and the test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/calibration/op_fit.h"
#include "sim/cost/network_calibration.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// One measured all-to-all (see the file comment).
struct CollectiveSample {
  std::string source;        // where it came from, e.g. "nccl-tests:a2a.txt", "engine:x.jsonl"
  int32_t ep_size = 0;       // participants: GPUs 0 .. ep_size - 1 of the topology (>= 2)
  double bytes_per_gpu = 0;  // bytes each GPU sends to the other participants (> 0)
  double measured_s = 0;     // duration (> 0)
  // "" for a plain all-to-all (fits a link class); a KernelFit name (network_calibration.h,
  // e.g. "low_latency_dispatch") for a kernel whose fixed cost is fitted on top of the calibrated
  // link classes: its x is the uniform all-to-all's time on the calibrated topology (on its
  // rdma_only_spec() when `rdma`).
  std::string kernel;
  bool rdma = false;  // kernel samples only: every peer over the network (pure-RDMA kernels)
};

// The nominal transfer time x (seconds, every latency zero) of a sample's all-to-all on
// `topology`, and the calibration class of its bottleneck link. Precondition: 2 <= ep_size <=
// topology GPUs, bytes_per_gpu > 0.
struct NominalCollective {
  double transfer_s = 0;
  std::string link_class;
};
NominalCollective nominal_collective(const Topology& topology, int32_t ep_size,
                                     double bytes_per_gpu);

struct NetworkFitReport {
  NetworkCalibration calibration;
  // Per sample, in input order: its class, the nominal transfer time and the fitted prediction.
  struct Row {
    std::string link_class;  // for kernel samples: the kernel's name
    double nominal_s = 0, predicted_s = 0, measured_s = 0;
  };
  std::vector<Row> rows;
  std::vector<std::string> skipped;  // "class: reason"
};

// Kernel samples (CollectiveSample::kernel non-empty) are fitted after the link classes: per
// kernel and transport, measured = fixed_s + x, x the sample's uniform all-to-all on the topology
// with the fitted classes applied and every latency zero (on its rdma_only_spec() for pure-RDMA
// samples), fixed_s by least squares on relative error, >= 0 (at least `min_samples` samples).
// Fits every class that has at least `min_samples` samples (and whose time grows with bytes) on
// `topology`. Throws ConfigError (key path "collective") naming the first sample that does not
// fit the topology (ep_size beyond its GPUs, non-positive bytes or time).
NetworkFitReport fit_network(const std::vector<CollectiveSample>& samples, const Topology& topology,
                             int32_t min_samples = 3);

}  // namespace moesim::sim

// A calibration profile's [network] section: per link class the efficiency (achieved / nominal
// bandwidth) and fixed latency of measured all-to-alls (fitted by sim/calibration/network_fit.h),
// and how it is applied to a topology.
//
// Applied (apply_network_calibration), a class's link capacities are multiplied by its efficiency
// and its latency becomes the whole route latency of any GPU pair of that class: the GPU's
// attachment links (NVLink port, NIC) get latency_s / 2 each and the switch traversals and
// leaf-spine links of the class get 0. The fixed cost of an NCCL all-to-all is software (launch,
// synchronisation, protocol), not per-hop wire latency, so it is placed where every route of the
// class pays it exactly once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/fit_types.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// The fit of one link class.
struct LinkClassFit {
  std::string link_class;  // "nvlink" or "network"
  double efficiency = 1;   // achieved / nominal bandwidth, in (0, 1] normally (> 0)
  double latency_s = 0;    // fixed time of one all-to-all over this class (>= 0)
  double bytes_per_gpu_min = 0, bytes_per_gpu_max = 0;  // samples' range
  int32_t ep_size_min = 0, ep_size_max = 0;
  FitQuality quality;  // of measured_s against latency_s + x / efficiency
};

// The fit of one collective kernel's fixed cost beyond the calibrated network model (DeepEP's
// low-latency kernels: launch and synchronisation, paid once per call): measured = fixed_s + x,
// x the bottleneck model's time of the kernel's traffic on the calibrated topology (its link
// classes' efficiencies applied; on rdma_only_spec() of it for the pure-RDMA transport). One fit
// per kernel and transport: the current kernels (NVLink within a node) and the original
// pure-RDMA ones synchronise differently.
struct KernelFit {
  std::string kernel;     // "low_latency_dispatch" or "low_latency_combine"
  std::string transport;  // "nvlink" or "rdma"
  double fixed_s = 0;     // >= 0
  int32_t ep_size_min = 0, ep_size_max = 0;
  FitQuality quality;  // of measured_s against fixed_s + x
};

// The kernels a [[network.kernel]] fit may name.
inline constexpr const char* kLowLatencyDispatchKernel = "low_latency_dispatch";
inline constexpr const char* kLowLatencyCombineKernel = "low_latency_combine";

// The profile's [network] section.
struct NetworkCalibration {
  std::string topology;  // name of the topology the samples were fitted on (information)
  std::vector<LinkClassFit> link_classes;  // at most one per class, "nvlink" before "network"
  // At most one per (kernel, transport); dispatch before combine, nvlink before rdma.
  std::vector<KernelFit> kernels;

  bool empty() const { return link_classes.empty() && kernels.empty(); }
  // The fit of `link_class`, or null.
  const LinkClassFit* find(const std::string& link_class) const;
  // The fit of `kernel` over `transport`, or null.
  const KernelFit* find_kernel(const std::string& kernel, const std::string& transport) const;
};

// "nvlink" for LinkClass::kNvlink, "network" for kNic and kLeafSpine.
const char* calibration_link_class(LinkClass link_class);

// `spec` with the calibration applied (see the file comment); classes without a fit unchanged.
TopologySpec apply_network_calibration(TopologySpec spec, const NetworkCalibration& calibration);

}  // namespace moesim::sim

#include "sim/cost/network_calibration.h"

#include <cmath>

namespace moesim::sim {
namespace {

SimTime half_ns(double seconds) { return static_cast<SimTime>(std::llround(0.5e9 * seconds)); }

}  // namespace

const LinkClassFit* NetworkCalibration::find(const std::string& link_class) const {
  for (const LinkClassFit& f : link_classes) {
    if (f.link_class == link_class) return &f;
  }
  return nullptr;
}

const KernelFit* NetworkCalibration::find_kernel(const std::string& kernel,
                                                 const std::string& transport) const {
  for (const KernelFit& f : kernels) {
    if (f.kernel == kernel && f.transport == transport) return &f;
  }
  return nullptr;
}

const char* calibration_link_class(LinkClass link_class) {
  return link_class == LinkClass::kNvlink ? "nvlink" : "network";
}

TopologySpec apply_network_calibration(TopologySpec spec, const NetworkCalibration& calibration) {
  if (const LinkClassFit* f = calibration.find("nvlink")) {
    spec.nvlink_efficiency = f->efficiency;  // of the line rate, replacing the default
    // Full mesh: one link per route; switch fabric: port, switch, port.
    spec.nvlink_latency_ns =
        spec.fabric == ScaleUpFabric::kFullMesh ? 2 * half_ns(f->latency_s) : half_ns(f->latency_s);
    spec.nvswitch_latency_ns = 0;
  }
  if (const LinkClassFit* f = calibration.find("network")) {
    // Leaf-spine capacities follow the NIC bandwidth.
    spec.network_efficiency = f->efficiency;
    spec.nic_latency_ns = half_ns(f->latency_s);
    spec.leaf_spine_latency_ns = 0;
    spec.switch_latency_ns = 0;
  }
  return spec;
}

}  // namespace moesim::sim

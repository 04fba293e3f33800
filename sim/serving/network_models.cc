#include "sim/serving/network_models.h"

#ifdef MOESIM_HAVE_SIMGRID
#include "sim/network/simgrid/simgrid_model.h"
#endif

namespace moesim::sim {

const NetworkModelRegistry& builtin_network_models() {
  static const NetworkModelRegistry registry = [] {
    NetworkModelRegistry r;
#ifdef MOESIM_HAVE_SIMGRID
    register_simgrid_model(r);
#endif
    return r;
  }();
  return registry;
}

KernelCost kernel_cost(const NetworkCalibration& calibration, const std::string& kernel,
                       LowLatencyTransport transport) {
  const KernelFit* f = calibration.find_kernel(kernel, low_latency_transport_name(transport));
  if (!f) return {};
  return {f->fixed_s};
}

}  // namespace moesim::sim

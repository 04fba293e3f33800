// The built-in network models, registered in one place for every caller (the replica builder,
// `moesim collective`, `moesim layers --network-model`): "bottleneck", "bottleneck_factored",
// "fluid" and, when built with SimGrid, "simgrid" (sim/network/simgrid).
#pragma once

#include <string>

#include "sim/cost/network_calibration.h"
#include "sim/network/network_model.h"
#include "sim/network/traffic_matrix.h"

namespace moesim::sim {

// The registry of every built-in model (built once, immutable).
const NetworkModelRegistry& builtin_network_models();

// The cost of `kernel` (kLowLatencyDispatchKernel, ...) over `transport` from a profile's
// [network] section: its [[network.kernel]] fit, or none (0) when the profile has no fit of it.
KernelCost kernel_cost(const NetworkCalibration& calibration, const std::string& kernel,
                       LowLatencyTransport transport);

}  // namespace moesim::sim

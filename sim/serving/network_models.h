// The built-in network models, registered in one place for every caller (the replica builder,
// `moesim collective`, `moesim layers --network-model`): "bottleneck", "bottleneck_factored",
// "fluid" and, when built with SimGrid, "simgrid" (sim/network/simgrid).
#pragma once

#include "sim/network/network_model.h"

namespace moesim::sim {

// The registry of every built-in model (built once, immutable).
const NetworkModelRegistry& builtin_network_models();

}  // namespace moesim::sim

// The one place a resolved [cost] choice becomes a CostModel: "roofline" (hardware peaks and
// efficiencies) or "calibrated" (a profile written by `moesim calibrate`, with the roofline as
// the fallback for kinds the profile lacks; see calibrated_cost_model.h); and the topology the
// network model runs on: the scenario's, or, with a calibrated profile that has a [network]
// section, a copy with that section's per-link-class efficiency and latency applied
// (network_calibration.h). Nothing here reads a file: the profile was read by load_scenario.
#pragma once

#include <memory>

#include "sim/cost/cost_model.h"
#include "sim/cost/cost_spec.h"
#include "sim/cost/profile.h"
#include "sim/topology/gpu_spec.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// Builds the cost model `spec` names for `gpu`. Precondition (checked): a calibrated spec
// carries its profile.
std::unique_ptr<CostModel> make_cost_model(const CostSpec& spec, const GpuSpec& gpu);

// The topology the network model must run on (see the file comment): `topology` itself unless
// spec is calibrated and its profile has a [network] section. The result is shared and
// immutable; it must outlive the network models made for it.
std::shared_ptr<const Topology> make_network_topology(const CostSpec& spec,
                                                      std::shared_ptr<const Topology> topology);
std::shared_ptr<const Topology> make_network_topology(const CalibrationProfile& profile,
                                                      std::shared_ptr<const Topology> topology);

// A calibrated model from a profile (tests, validate), with spec.roofline as the fallback.
std::unique_ptr<CostModel> make_calibrated_cost_model(CalibrationProfile profile,
                                                      const CostSpec& spec, const GpuSpec& gpu);

}  // namespace moesim::sim

// The one place a scenario's [cost] choice becomes a CostModel: "roofline" (hardware peaks and
// efficiencies) or "calibrated" (a profile written by `moesim calibrate`, with the roofline as
// the fallback for kinds the profile lacks; see calibrated_cost_model.h); and the topology its
// network model runs on: the scenario's, or, with a calibrated profile that has a [network]
// section, a copy with that section's per-link-class efficiency and latency applied
// (network_fit.h).
#pragma once

#include <memory>
#include <vector>

#include "sim/calibration/profile.h"
#include "sim/cost/cost_model.h"
#include "sim/scenario/scenario.h"
#include "sim/topology/gpu_spec.h"

namespace moesim::sim {

// Builds the cost model `spec` names for `gpu`. For kCalibrated reads spec.profile_path (the
// configuration edge: a missing or malformed profile is a ConfigError naming the file).
std::unique_ptr<CostModel> make_cost_model(const CostSpec& spec, const GpuSpec& gpu);

// The topology the scenario's network model must run on (see the file comment): `topology`
// itself unless spec is calibrated and its profile has a [network] section. Reads the profile
// (ConfigError as make_cost_model). The result is shared and immutable; it must outlive the
// network models made for it.
std::shared_ptr<const Topology> make_network_topology(const CostSpec& spec,
                                                      std::shared_ptr<const Topology> topology);
std::shared_ptr<const Topology> make_network_topology(const CalibrationProfile& profile,
                                                      std::shared_ptr<const Topology> topology);

// A calibrated model from an already loaded profile (tests, validate).
std::unique_ptr<CostModel> make_calibrated_cost_model(CalibrationProfile profile,
                                                      const CostSpec& spec, const GpuSpec& gpu);

}  // namespace moesim::sim

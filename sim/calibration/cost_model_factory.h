// The one place a scenario's [cost] choice becomes a CostModel: "roofline" (hardware peaks and
// efficiencies) or "calibrated" (a profile written by `moesim calibrate`, with the roofline as
// the fallback for kinds the profile lacks; see calibrated_cost_model.h).
#pragma once

#include <memory>

#include "sim/calibration/profile.h"
#include "sim/cost/cost_model.h"
#include "sim/scenario/scenario.h"
#include "sim/topology/gpu_spec.h"

namespace moesim::sim {

// Builds the cost model `spec` names for `gpu`. For kCalibrated reads spec.profile_path (the
// configuration edge: a missing or malformed profile is a ConfigError naming the file).
std::unique_ptr<CostModel> make_cost_model(const CostSpec& spec, const GpuSpec& gpu);

// A calibrated model from an already loaded profile (tests, validate).
std::unique_ptr<CostModel> make_calibrated_cost_model(CalibrationProfile profile,
                                                      const CostSpec& spec, const GpuSpec& gpu);

}  // namespace moesim::sim

// A scenario's [cost] choice, resolved at the configuration edge: the roofline model with its
// parameters, or a calibrated profile already read and validated (load_scenario reads the file
// once; nothing downstream opens it again). docs/scenarios.md, [cost].
#pragma once

#include <memory>
#include <string>

#include "sim/cost/profile.h"
#include "sim/cost/roofline.h"

namespace moesim::sim {

enum class CostModelKind { kRoofline, kCalibrated };

struct CostSpec {
  CostModelKind kind = CostModelKind::kRoofline;
  std::string profile_path;  // kCalibrated: the file the profile was read from (information)
  // kCalibrated: the parsed profile (non-null), shared by every copy of the scenario.
  std::shared_ptr<const CalibrationProfile> profile;
  RooflineParams roofline = RooflineParams::defaults();  // also the calibrated model's fallback
};

}  // namespace moesim::sim

#include "sim/cost/cost_model_factory.h"

#include "base/check.h"
#include "sim/cost/calibrated_cost_model.h"
#include "sim/cost/roofline.h"

namespace moesim::sim {

std::unique_ptr<CostModel> make_calibrated_cost_model(CalibrationProfile profile,
                                                      const CostSpec& spec, const GpuSpec& gpu) {
  return std::make_unique<CalibratedCostModel>(
      std::move(profile), std::make_unique<RooflineCostModel>(gpu, spec.roofline), gpu);
}

std::shared_ptr<const Topology> make_network_topology(const CalibrationProfile& profile,
                                                      std::shared_ptr<const Topology> topology) {
  if (profile.network.empty()) return topology;
  return std::make_shared<const Topology>(
      apply_network_calibration(topology->spec(), profile.network));
}

std::shared_ptr<const Topology> make_network_topology(const CostSpec& spec,
                                                      std::shared_ptr<const Topology> topology) {
  if (spec.kind != CostModelKind::kCalibrated) return topology;
  MOESIM_CHECK(spec.profile != nullptr, "a calibrated cost spec carries its profile");
  return make_network_topology(*spec.profile, std::move(topology));
}

std::unique_ptr<CostModel> make_cost_model(const CostSpec& spec, const GpuSpec& gpu) {
  if (spec.kind == CostModelKind::kCalibrated) {
    MOESIM_CHECK(spec.profile != nullptr, "a calibrated cost spec carries its profile");
    return make_calibrated_cost_model(*spec.profile, spec, gpu);
  }
  return std::make_unique<RooflineCostModel>(gpu, spec.roofline);
}

}  // namespace moesim::sim

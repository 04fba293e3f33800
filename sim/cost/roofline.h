// Roofline cost model: an op takes
//   overhead + max(flops / (peak_flops(dtype) * compute_efficiency),
//                  bytes / (hbm_bytes_per_s * bandwidth_efficiency))
// with per-op-kind efficiencies and fixed overheads, overridden by a scenario's
// [cost.roofline.<op>] tables. The weights' dtype picks the peak (the next wider one where the GPU
// has none); attention's core FLOPs run at core_attention's peak. The defaults and the dtype
// rules: docs/cost.md, "roofline (default)" and "Per-op precision".
#pragma once

#include <array>

#include "sim/cost/cost_model.h"
#include "sim/topology/gpu_spec.h"

namespace moesim::sim {

class TomlTable;

struct OpEfficiency {
  double compute_efficiency = 0.7;    // (0, 1]
  double bandwidth_efficiency = 0.8;  // (0, 1]
  double overhead_us = 0.0;           // >= 0
};

struct RooflineParams {
  std::array<OpEfficiency, kNumOpKinds> ops;
  // The defaults of docs/cost.md.
  static RooflineParams defaults();
};

// Reads [cost.roofline] (a table of op-kind tables); absent keys keep their defaults.
RooflineParams parse_roofline_params(TomlTable& roofline);

// The peak FLOP/s the roofline uses for weights of `dtype` on `gpu` (see the file comment).
double compute_peak_flops_per_s(const GpuSpec& gpu, DType dtype);

class RooflineCostModel final : public CostModel {
 public:
  RooflineCostModel(GpuSpec gpu, RooflineParams params);
  std::string_view name() const override { return "roofline"; }
  double seconds(const OpWork& work) const override;
  // Names the GPU's peaks and [cost.roofline].
  std::string describe_inputs() const override;
  const RooflineParams& params() const { return params_; }

 private:
  GpuSpec gpu_;
  RooflineParams params_;
  std::array<double, 7> peak_by_dtype_{};  // indexed by DType
};

}  // namespace moesim::sim

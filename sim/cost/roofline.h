// Roofline cost model: an op takes
//   overhead + max(flops / (peak_flops(dtype) * compute_efficiency),
//                  bytes / (hbm_bytes_per_s * bandwidth_efficiency))
// with per-op-kind efficiencies and fixed overheads (kernel launch, synchronisation). Defaults
// are documented in docs/cost.md; a scenario's [cost.roofline.<op>] tables override them.
//
// Compute dtype: weights in bf16/fp16 run at the BF16 peak, fp8/mxfp8 at the FP8 peak, mxfp4 /
// nvfp4 at the FP4 peak; where the GPU lacks a peak for the dtype, the next wider one with a
// peak is used (e.g. MXFP4 weights on H200 are up-cast to FP8), as kernels do.
// Attention ops compute their core FLOPs (OpWork::core_flops) at the peak of core_dtype
// (precision.core_attention) and the rest at the peak of dtype; one roofline over both.
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

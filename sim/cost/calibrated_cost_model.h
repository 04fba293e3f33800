// The calibrated cost model: op durations from a calibration profile (profile.h).
//
// A simulator query (OpWork) is priced by the profile's fit of its kind and dtype, after adapting
// the query to the engine's conventions where the two differ (docs/calibration.md):
//   rmsnorm       the simulator asks once per norm (bytes 4 T H) and doubles the answer; the
//                 profile timed both norms together, so the query is priced as both norms
//                 (bytes x 2) and halved.
//   permute       the simulator's permute stands for the engine's permute and unpermute:
//                 the two fits are summed (same rows, same bytes).
//   lm_head       priced by the lm_head fit (fitted on FLOPs and weight bytes, which is what the
//                 simulator counts). A profile without one (fitted before the engine ran the
//                 output head) prices it with the dense_ffn fit of the same dtype (a GEMM of the
//                 same form), counted by num_proxy_queries() and as out of range.
// Kernel-level fits ([compute], compute_calibration.h) price, for a kind the profile has no op fit
// for, relative to the GPU's own peaks (`gpu`):
//   expert_ffn    two grouped GEMMs (gate/up n = 2 I, k = H; down n = H, k = I) over the active
//                 experts with tokens / active rows each, in the grouped layout whose fitted rows
//                 per group are nearest (contiguous for prefill-sized groups, masked for decode).
//   shared_expert, dense_ffn   the same two GEMMs, dense.
//   attention     the projections as one dense GEMM of the attention dtype (FLOPs flops -
//                 core_flops; output 2 T hidden bytes, input the rest of bytes - core_bytes)
//                 plus the core by the kind's attention-core fit at core_dtype. Kinds without
//                 an attention-core fit are priced whole by the fallback.
// A GEMM whose rows per group lie outside the fit's, or whose dtype the profile lacks (the
// fitted dtype's efficiencies then apply to the query dtype's peak), counts as out of range.
// A query is counted by num_out_of_range_queries() when its fitted features fall outside the
// ranges the fit saw, when the profile lacks its dtype (another dtype's fit of the kind is used)
// or when the profile lacks its kind entirely (the fallback model prices it). Counting is
// thread-safe; the counts never influence results.
#pragma once

#include <array>
#include <atomic>
#include <memory>

#include "sim/cost/cost_model.h"
#include "sim/cost/profile.h"
#include "sim/topology/gpu_spec.h"

namespace moesim::sim {

class CalibratedCostModel final : public CostModel {
 public:
  // `fallback` prices kinds the profile has no fit for (non-null).
  // `gpu` gives the peaks [compute] efficiencies apply to (unused without [compute]).
  CalibratedCostModel(CalibrationProfile profile, std::unique_ptr<CostModel> fallback,
                      GpuSpec gpu = {});

  std::string_view name() const override { return "calibrated"; }
  double seconds(const OpWork& work) const override;
  int64_t num_out_of_range_queries() const override;
  bool counts_queries() const override { return true; }
  // Names the profile (and the fallback, which prices the kinds it lacks).
  std::string describe_inputs() const override;
  // Out-of-range queries of one kind.
  int64_t num_out_of_range_queries(OpKind kind) const;
  // Queries priced through a proxy kind (lm_head by dense_ffn, in profiles without lm_head).
  int64_t num_proxy_queries() const { return num_proxy_.load(std::memory_order_relaxed); }
  const CalibrationProfile& profile() const { return profile_; }

 private:
  // Seconds of `kind_name` by the profile; false in *in_range when out of range or the dtype
  // was substituted. Null return value (negative) when the profile lacks the kind.
  double fitted_seconds(std::string_view kind_name, std::string_view dtype, double flops,
                        double bytes, double tokens, bool* in_range) const;
  void count_out_of_range(OpKind kind) const;
  // Seconds of `work` by the [compute] fits, or negative when they do not cover its kind.
  double compute_seconds(const OpWork& work, bool* in_range) const;
  double gemm_seconds(GemmShape g, DType dtype, bool* in_range) const;

  CalibrationProfile profile_;
  std::unique_ptr<CostModel> fallback_;
  GpuSpec gpu_;
  mutable std::array<std::atomic<int64_t>, kNumOpKinds> out_of_range_{};
  mutable std::atomic<int64_t> num_proxy_{0};
};

// The dtype name a profile uses for a model dtype: the format the engine runs for it
// (docs/engine.md, "Dtypes"): fp32; bf16 for bf16 and fp16; fp8 for fp8, mxfp8, mxfp4, nvfp4.
std::string_view profile_dtype_name(DType dtype);

}  // namespace moesim::sim

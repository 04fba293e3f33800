// The calibrated cost model: op durations from a calibration profile (profile.h).
//
// A simulator query (OpWork) is priced by the profile's fit of its kind and dtype, after
// adapting the query to the engine's conventions where the two differ (rmsnorm priced as both
// norms and halved, permute as permute + unpermute); kinds with no op fit are priced by the
// profile's kernel-level [compute] fits relative to the GPU's peaks, else by the roofline
// fallback. A query no fit prices inside its range is counted (thread-safe; counts never
// influence results): as priced by a stated rule where one applies (a GEMM beyond its fitted
// rows, an attention core of a dtype without a fit, a kind the kernel tables do not cover),
// else as out of range. docs/calibration.md ("The calibrated cost model", "Public profile:
// compute", "Where no fit applies") has the rules.
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
  CostQueryCounts query_counts() const override;
  bool counts_queries() const override { return true; }
  // Names the profile (and the fallback, which prices the kinds it lacks).
  std::string describe_inputs() const override;
  // Out-of-range queries of one kind.
  int64_t num_out_of_range_queries(OpKind kind) const;
  // Queries of one kind priced by a stated rule (docs/calibration.md, "Where no fit applies").
  int64_t num_by_rule_queries(OpKind kind) const;
  // Queries priced through a proxy kind (lm_head by dense_ffn, in profiles without lm_head).
  int64_t num_proxy_queries() const { return num_proxy_.load(std::memory_order_relaxed); }
  const CalibrationProfile& profile() const { return profile_; }

 private:
  // How a query was priced, in increasing order of doubt.
  enum class Coverage { kFitted, kByRule, kOutOfRange };
  static void worsen(Coverage* coverage, Coverage by) {
    if (by > *coverage) *coverage = by;
  }

  // Seconds of `kind_name` by the profile; false in *in_range when out of range or the dtype
  // was substituted. Null return value (negative) when the profile lacks the kind.
  double fitted_seconds(std::string_view kind_name, std::string_view dtype, double flops,
                        double bytes, double tokens, bool* in_range) const;
  void count(OpKind kind, Coverage coverage) const;
  // Seconds of `work` by the [compute] fits, or negative when they do not cover its kind.
  double compute_seconds(const OpWork& work, Coverage* coverage) const;
  // A GEMM by the fit of its layout and dtype, plus `extra_input_bytes` (bytes the shape does
  // not count) at the fit's input efficiency; the rows rules beyond the fitted rows.
  double gemm_seconds(GemmShape g, DType dtype, double extra_input_bytes, Coverage* coverage) const;
  // An attention op: its projections as one dense GEMM plus its core by the core fit.
  double attention_seconds(const OpWork& work, Coverage* coverage) const;

  CalibrationProfile profile_;
  std::unique_ptr<CostModel> fallback_;
  GpuSpec gpu_;
  mutable std::array<std::atomic<int64_t>, kNumOpKinds> out_of_range_{};
  mutable std::array<std::atomic<int64_t>, kNumOpKinds> by_rule_{};
  mutable std::atomic<int64_t> num_proxy_{0};
};

// The dtype name a profile uses for a model dtype: the format the engine runs for it
// (docs/engine.md, "Dtypes"): fp32; bf16 for bf16 and fp16; fp8 for fp8, mxfp8, mxfp4, nvfp4.
std::string_view profile_dtype_name(DType dtype);

}  // namespace moesim::sim

#include "sim/cost/roofline.h"

#include <algorithm>
#include <span>
#include <string>

#include "sim/config/toml_source.h"

namespace moesim::sim {

RooflineParams RooflineParams::defaults() {
  RooflineParams p;
  auto set = [&p](OpKind k, double c, double b, double o) {
    p.ops[static_cast<int>(k)] = OpEfficiency{c, b, o};
  };
  // compute efficiency, bandwidth efficiency, overhead (us). Sources and reasoning: docs/cost.md.
  set(OpKind::kRmsNorm, 0.5, 0.7, 1.0);
  set(OpKind::kAttnMlaPrefill, 0.5, 0.7, 3.0);
  set(OpKind::kAttnMlaDecode, 0.35, 0.7, 3.0);
  set(OpKind::kAttnGqaPrefill, 0.5, 0.7, 3.0);
  set(OpKind::kAttnGqaDecode, 0.35, 0.7, 3.0);
  set(OpKind::kAttnKdaPrefill, 0.3, 0.6, 3.0);
  set(OpKind::kAttnKdaDecode, 0.3, 0.6, 3.0);
  set(OpKind::kRouter, 0.5, 0.7, 2.0);
  set(OpKind::kPermute, 0.5, 0.6, 2.0);
  set(OpKind::kExpertFfn, 0.65, 0.8, 4.0);
  set(OpKind::kSharedExpert, 0.7, 0.8, 2.0);
  set(OpKind::kDenseFfn, 0.7, 0.8, 2.0);
  set(OpKind::kCombine, 0.5, 0.6, 2.0);
  set(OpKind::kLmHead, 0.7, 0.8, 2.0);
  // The all-to-alls are timed by the network model; their entries only matter to calibration.
  set(OpKind::kDispatchA2a, 1.0, 1.0, 0.0);
  set(OpKind::kCombineA2a, 1.0, 1.0, 0.0);
  return p;
}

RooflineParams parse_roofline_params(TomlTable& roofline) {
  RooflineParams p = RooflineParams::defaults();
  for (const std::string& key : roofline.keys()) {
    auto kind = op_kind_from_name(key);
    if (!kind) {
      std::string valid;
      for (int i = 0; i < kNumOpKinds; ++i) {
        valid += (i ? ", " : "") + std::string(op_kind_name(static_cast<OpKind>(i)));
      }
      roofline.fail(key, "unknown op kind '" + key + "' (valid: " + valid + ")");
    }
    TomlTable t = roofline.get_table(key);
    OpEfficiency& e = p.ops[static_cast<int>(*kind)];
    e.compute_efficiency =
        t.get_double_in_or("compute_efficiency", 1e-6, 1.0, e.compute_efficiency);
    e.bandwidth_efficiency =
        t.get_double_in_or("bandwidth_efficiency", 1e-6, 1.0, e.bandwidth_efficiency);
    e.overhead_us = t.get_double_in_or("overhead_us", 0.0, 1e6, e.overhead_us);
    t.finish();
  }
  roofline.finish();
  return p;
}

double compute_peak_flops_per_s(const GpuSpec& gpu, DType dtype) {
  // Preference order from the dtype's own path to wider ones.
  static constexpr GpuDtype kFp4Order[] = {GpuDtype::kFp4, GpuDtype::kFp8, GpuDtype::kBf16,
                                           GpuDtype::kFp32};
  static constexpr GpuDtype kFp8Order[] = {GpuDtype::kFp8, GpuDtype::kBf16, GpuDtype::kFp32};
  static constexpr GpuDtype kBf16Order[] = {GpuDtype::kBf16, GpuDtype::kFp32};
  static constexpr GpuDtype kFp32Order[] = {GpuDtype::kFp32};
  std::span<const GpuDtype> order;
  switch (dtype) {
    case DType::kMXFP4:
    case DType::kNVFP4:
      order = kFp4Order;
      break;
    case DType::kFP8:
    case DType::kMXFP8:
      order = kFp8Order;
      break;
    case DType::kBF16:
    case DType::kFP16:
      order = kBf16Order;
      break;
    case DType::kFP32:
      order = kFp32Order;
      break;
  }
  for (GpuDtype d : order) {
    double peak = gpu.peak_flops_per_s(d);
    if (peak > 0) return peak;
  }
  return 0;
}

RooflineCostModel::RooflineCostModel(GpuSpec gpu, RooflineParams params)
    : gpu_(std::move(gpu)), params_(params) {
  for (int d = 0; d < 7; ++d) {
    peak_by_dtype_[d] = compute_peak_flops_per_s(gpu_, static_cast<DType>(d));
  }
}

double RooflineCostModel::seconds(const OpWork& work) const {
  if (work.empty()) return 0.0;
  const OpEfficiency& e = params_.ops[static_cast<int>(work.kind)];
  double peak = peak_by_dtype_[static_cast<int>(work.dtype)];
  double compute_s = peak > 0 ? work.flops / (peak * e.compute_efficiency) : 0.0;
  // The attention core at its own dtype (precision.core_attention) where that has another peak
  // than the projections' dtype; with equal peaks the single quotient above is kept (bit for
  // bit the figure before the split).
  const double core_peak = peak_by_dtype_[static_cast<int>(work.core_dtype)];
  if (work.core_flops > 0 && peak > 0 && core_peak > 0 && core_peak != peak) {
    compute_s = (work.flops - work.core_flops) / (peak * e.compute_efficiency) +
                work.core_flops / (core_peak * e.compute_efficiency);
  }
  double memory_s =
      gpu_.hbm_bytes_per_s > 0 ? work.bytes / (gpu_.hbm_bytes_per_s * e.bandwidth_efficiency) : 0.0;
  return e.overhead_us * 1e-6 + std::max(compute_s, memory_s);
}

std::string RooflineCostModel::describe_inputs() const {
  return "the peak FLOP/s and HBM bandwidth of GPU '" + gpu_.name +
         "' ([gpu] in the topology) and [cost.roofline]";
}

}  // namespace moesim::sim

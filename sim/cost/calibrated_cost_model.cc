#include "sim/cost/calibrated_cost_model.h"

#include <algorithm>
#include <cmath>

#include "sim/core/check.h"

namespace moesim::sim {

std::string_view profile_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFP32:
      return "fp32";
    case DType::kBF16:
    case DType::kFP16:
      return "bf16";
    case DType::kFP8:
    case DType::kMXFP8:
    case DType::kMXFP4:
    case DType::kNVFP4:
      return "fp8";
  }
  return "bf16";
}

CalibratedCostModel::CalibratedCostModel(CalibrationProfile profile,
                                         std::unique_ptr<CostModel> fallback)
    : profile_(std::move(profile)), fallback_(std::move(fallback)) {
  MOESIM_CHECK(fallback_ != nullptr, "calibrated cost model needs a fallback model");
}

double CalibratedCostModel::fitted_seconds(std::string_view kind_name, std::string_view dtype,
                                           double flops, double bytes, double tokens,
                                           bool* in_range) const {
  const OpFit* fit = profile_.find(kind_name, dtype, bytes);
  bool substituted = false;
  if (!fit) {
    auto fits = profile_.find_kind(kind_name);
    if (fits.empty()) return -1.0;
    fit = fits.front();
    substituted = true;
  }
  *in_range = *in_range && !substituted && fit->in_range(flops, bytes, tokens);
  return std::max(0.0, fit->predict_s(flops, bytes, tokens));
}

void CalibratedCostModel::count_out_of_range(OpKind kind) const {
  out_of_range_[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
}

double CalibratedCostModel::seconds(const OpWork& work) const {
  if (work.empty()) return 0.0;
  const std::string_view dtype = profile_dtype_name(work.dtype);
  const double tokens = static_cast<double>(work.tokens);
  bool in_range = true;
  double s = -1.0;
  switch (work.kind) {
    case OpKind::kRmsNorm: {
      double both = fitted_seconds("rmsnorm", dtype, 0.0, 2.0 * work.bytes, tokens, &in_range);
      s = both < 0 ? -1.0 : 0.5 * both;
      break;
    }
    case OpKind::kPermute: {
      s = fitted_seconds("permute", dtype, work.flops, work.bytes, tokens, &in_range);
      if (s >= 0) {
        double un = fitted_seconds("unpermute", dtype, work.flops, work.bytes, tokens, &in_range);
        if (un > 0) s += un;
      }
      break;
    }
    case OpKind::kLmHead:
      // Profiles fitted before the engine ran the output head have no lm_head fit: the
      // dense_ffn fit (a GEMM of the same form) stands in, counted as a proxy and out of range.
      s = fitted_seconds("lm_head", dtype, work.flops, work.bytes, tokens, &in_range);
      if (s < 0) {
        s = fitted_seconds("dense_ffn", dtype, work.flops, work.bytes, tokens, &in_range);
        if (s >= 0) {
          num_proxy_.fetch_add(1, std::memory_order_relaxed);
          in_range = false;
        }
      }
      break;
    default:
      s = fitted_seconds(op_kind_name(work.kind), dtype, work.flops, work.bytes, tokens, &in_range);
      break;
  }
  if (s < 0) {
    count_out_of_range(work.kind);
    return fallback_->seconds(work);
  }
  if (!in_range) count_out_of_range(work.kind);
  return s;
}

std::string CalibratedCostModel::describe_inputs() const {
  return "the coefficients of calibration profile '" + profile_.name +
         "' (op kinds it has no fit for: " + fallback_->describe_inputs() + ")";
}

int64_t CalibratedCostModel::num_out_of_range_queries() const {
  int64_t n = 0;
  for (const auto& c : out_of_range_) n += c.load(std::memory_order_relaxed);
  return n;
}

int64_t CalibratedCostModel::num_out_of_range_queries(OpKind kind) const {
  return out_of_range_[static_cast<int>(kind)].load(std::memory_order_relaxed);
}

}  // namespace moesim::sim

#include "sim/cost/compute_calibration.h"

#include <algorithm>
#include <limits>

namespace moesim::sim {

const char* gemm_layout_name(GemmLayout layout) {
  switch (layout) {
    case GemmLayout::kContiguousGrouped:
      return "contiguous_grouped";
    case GemmLayout::kMaskedGrouped:
      return "masked_grouped";
    case GemmLayout::kDense:
      return "dense";
  }
  return "dense";
}

std::optional<GemmLayout> gemm_layout_from_name(std::string_view name) {
  for (GemmLayout l :
       {GemmLayout::kContiguousGrouped, GemmLayout::kMaskedGrouped, GemmLayout::kDense}) {
    if (name == gemm_layout_name(l)) return l;
  }
  return std::nullopt;
}

double GemmFit::seconds(const GemmShape& g, double peak_flops_per_s, double hbm_bytes_per_s) const {
  return g.flops() / (peak_flops_per_s * compute_efficiency) +
         g.input_bytes() / (hbm_bytes_per_s * input_bandwidth_efficiency) +
         g.output_bytes() / (hbm_bytes_per_s * output_bandwidth_efficiency);
}

double AttentionCoreFit::seconds(double core_flops, double core_bytes, double attended_pairs,
                                 double queries, double peak_flops_per_s,
                                 double hbm_bytes_per_s) const {
  const double overhead = attended_pairs > 0 ? query_overhead_keys * queries / attended_pairs : 0.0;
  return std::max(core_flops * (1.0 + overhead) / (peak_flops_per_s * compute_efficiency),
                  core_bytes / (hbm_bytes_per_s * bandwidth_efficiency));
}

const GemmFit* ComputeCalibration::find_gemm(GemmLayout layout, std::string_view dtype) const {
  for (const GemmFit& f : gemms) {
    if (f.layout == layout && f.dtype == dtype) return &f;
  }
  return nullptr;
}

const GemmFit* ComputeCalibration::find_gemm_any_dtype(GemmLayout layout) const {
  for (const GemmFit& f : gemms) {
    if (f.layout == layout) return &f;
  }
  return nullptr;
}

const AttentionCoreFit* ComputeCalibration::find_attention(std::string_view kind,
                                                           std::string_view dtype) const {
  for (const AttentionCoreFit& f : attention) {
    if (f.kind == kind && f.dtype == dtype) return &f;
  }
  return nullptr;
}

const GemmFit* ComputeCalibration::grouped_fit_for(double m_per_group,
                                                   std::string_view dtype) const {
  const GemmFit* best = nullptr;
  double best_ratio = std::numeric_limits<double>::infinity();
  for (const GemmFit& f : gemms) {
    if (f.layout == GemmLayout::kDense || f.dtype != dtype) continue;
    const double m = std::max(m_per_group, 1e-9);
    double ratio = 1.0;
    if (m < f.m_per_group_min) ratio = f.m_per_group_min / m;
    if (m > f.m_per_group_max) ratio = m / f.m_per_group_max;
    if (ratio < best_ratio) {
      best_ratio = ratio;
      best = &f;
    }
  }
  return best;
}

}  // namespace moesim::sim

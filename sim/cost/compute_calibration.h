// Kernel-level compute calibration of a profile ([compute]): GEMM time by layout and
// attention-core rates, as efficiencies relative to the GPU's peaks, so that one fit prices any
// GPU of the same kernels through its own peaks.
//
// A GEMM (DeepGEMM's definitions of FLOPs and bytes) costs its FLOPs over the dtype's peak plus
// its input and output bytes over HBM, each term divided by its efficiency; an attention core
// the larger of its FLOPs and bytes terms, the FLOPs term with a fixed cost per query (prefill
// kernels: a query's softmax and output tiles cost as much as attending a number of keys, so the
// rate rises with the keys a query attends and saturates). docs/calibration.md ("Public
// profile: compute") has the formulas.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost/fit_types.h"

namespace moesim::sim {

enum class GemmLayout { kContiguousGrouped, kMaskedGrouped, kDense };
// "contiguous_grouped", "masked_grouped", "dense".
const char* gemm_layout_name(GemmLayout layout);
std::optional<GemmLayout> gemm_layout_from_name(std::string_view name);

struct GemmShape {
  GemmLayout layout = GemmLayout::kDense;
  double num_groups = 1;   // groups (experts) with rows; 1 for dense
  double m_per_group = 0;  // rows per group (may be a mean)
  double n = 0;
  double k = 0;
  double activation_bytes_per_element = 1;  // A (FP8 kernels take FP8 activations)
  double weight_bytes_per_element = 1;      // B

  double flops() const { return 2.0 * num_groups * m_per_group * n * k; }
  double input_bytes() const {
    return num_groups * m_per_group * k * activation_bytes_per_element +
           num_groups * n * k * weight_bytes_per_element;
  }
  double output_bytes() const { return 2.0 * num_groups * m_per_group * n; }
};

struct GemmFit {
  GemmLayout layout = GemmLayout::kDense;
  std::string dtype;  // profile dtype ("fp8")
  double compute_efficiency = 1;
  double input_bandwidth_efficiency = 1;
  double output_bandwidth_efficiency = 1;
  double m_per_group_min = 0, m_per_group_max = 0;  // samples' range
  FitQuality quality;

  // Seconds of `g` on a GPU of `peak_flops_per_s` (of the GEMM's dtype) and `hbm_bytes_per_s`.
  double seconds(const GemmShape& g, double peak_flops_per_s, double hbm_bytes_per_s) const;
};

struct AttentionCoreFit {
  std::string kind;   // cost-model op kind, e.g. "attn_mla_decode"
  std::string dtype;  // profile dtype of the core's math ("bf16", "fp8")
  double compute_efficiency = 1;
  double bandwidth_efficiency = 1;
  // The fixed cost of one query token, in keys attended at the compute rate (0: none).
  double query_overhead_keys = 0;
  // Mean keys a query attends in the fitted samples; both 0 when the fit has no range (rates
  // converted at their binding limit: the decode cores).
  double keys_per_query_min = 0, keys_per_query_max = 0;
  FitQuality quality;  // num_samples 0 when not fitted by least squares

  bool has_range() const { return keys_per_query_max > 0; }
  // Seconds of a core of `core_flops` over `attended_pairs` (query, key) pairs of `queries`
  // query tokens reading `core_bytes`: max(core_flops (1 + overhead queries / pairs) / (peak
  // c), core_bytes / (HBM b)); without pairs (<= 0) the FLOPs term has no overhead.
  double seconds(double core_flops, double core_bytes, double attended_pairs, double queries,
                 double peak_flops_per_s, double hbm_bytes_per_s) const;
};

struct ComputeCalibration {
  std::string gpu;  // catalogue name of the GPU whose peaks the efficiencies are relative to
  std::vector<GemmFit> gemms;
  // The highest fraction of HBM bandwidth a fitted GEMM moved (its input and output bytes over
  // its time): the floor below the fitted rows (docs/calibration.md, "Where no fit applies");
  // 0 when unknown.
  double gemm_max_bandwidth_efficiency = 0;
  std::vector<AttentionCoreFit> attention;

  bool empty() const { return gemms.empty() && attention.empty(); }
  const GemmFit* find_gemm(GemmLayout layout, std::string_view dtype) const;
  // Any dtype's fit of `layout` (the first), or null.
  const GemmFit* find_gemm_any_dtype(GemmLayout layout) const;
  const AttentionCoreFit* find_attention(std::string_view kind, std::string_view dtype) const;
  // The grouped layout a grouped GEMM of `m_per_group` rows per group runs: the fitted one whose
  // m_per_group range is nearest in ratio (inside it: distance 1); null when none is fitted.
  const GemmFit* grouped_fit_for(double m_per_group, std::string_view dtype) const;
};

}  // namespace moesim::sim

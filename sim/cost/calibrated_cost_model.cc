#include "sim/cost/calibrated_cost_model.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "sim/cost/roofline.h"

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
                                         std::unique_ptr<CostModel> fallback, GpuSpec gpu)
    : profile_(std::move(profile)), fallback_(std::move(fallback)), gpu_(std::move(gpu)) {
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

void CalibratedCostModel::count(OpKind kind, Coverage coverage) const {
  const auto k = static_cast<size_t>(kind);
  if (coverage == Coverage::kOutOfRange) out_of_range_[k].fetch_add(1, std::memory_order_relaxed);
  if (coverage == Coverage::kByRule) by_rule_[k].fetch_add(1, std::memory_order_relaxed);
}

double CalibratedCostModel::gemm_seconds(GemmShape g, DType dtype, double extra_input_bytes,
                                         Coverage* coverage) const {
  const ComputeCalibration& c = profile_.compute;
  const std::string_view pd = profile_dtype_name(dtype);
  const GemmFit* fit = nullptr;
  if (g.layout == GemmLayout::kDense) {
    fit = c.find_gemm(GemmLayout::kDense, pd);
  } else {
    fit = c.grouped_fit_for(g.m_per_group, pd);
  }
  if (!fit) {
    // Another dtype's fit of the layout: its efficiencies against this dtype's peak.
    fit = c.find_gemm_any_dtype(g.layout);
    if (!fit && g.layout != GemmLayout::kDense) {
      for (const GemmFit& f : c.gemms) {
        if (f.layout != GemmLayout::kDense) {
          fit = &f;
          break;
        }
      }
    }
    if (!fit) return -1.0;
    worsen(coverage, Coverage::kOutOfRange);
  }
  g.layout = fit->layout;
  const double peak = compute_peak_flops_per_s(gpu_, dtype);
  const double hbm = gpu_.hbm_bytes_per_s;
  if (!(peak > 0) || !(hbm > 0)) return -1.0;
  const double extra_s = extra_input_bytes / (hbm * fit->input_bandwidth_efficiency);
  if (g.m_per_group > fit->m_per_group_max) {
    // Rule: the FLOP rate of the largest fitted rows (a compute-bound GEMM's rate saturates).
    GemmShape at_max = g;
    at_max.m_per_group = fit->m_per_group_max;
    worsen(coverage, Coverage::kByRule);
    return fit->seconds(at_max, peak, hbm) * (g.m_per_group / fit->m_per_group_max) + extra_s;
  }
  const double s = fit->seconds(g, peak, hbm) + extra_s;
  if (g.m_per_group < fit->m_per_group_min) {
    // Rule: at least its bytes at the highest bandwidth a fitted GEMM moved (fewer rows than
    // any fitted one: the weights' reads bound it).
    const double ceiling = c.gemm_max_bandwidth_efficiency;
    if (!(ceiling > 0)) {
      worsen(coverage, Coverage::kOutOfRange);
      return s;
    }
    worsen(coverage, Coverage::kByRule);
    const double bytes = g.input_bytes() + g.output_bytes() + extra_input_bytes;
    return std::max(s, bytes / (hbm * ceiling));
  }
  return s;
}

double CalibratedCostModel::attention_seconds(const OpWork& work, Coverage* coverage) const {
  const ComputeCalibration& c = profile_.compute;
  DType core_dtype = work.core_dtype;
  const AttentionCoreFit* core =
      c.find_attention(op_kind_name(work.kind), profile_dtype_name(core_dtype));
  if (!core && profile_dtype_name(core_dtype) != "bf16") {
    // Rule: a core of a dtype without a fit of its kind runs as the kind's BF16 dense kernel.
    core = c.find_attention(op_kind_name(work.kind), "bf16");
    core_dtype = DType::kBF16;
    if (core) worsen(coverage, Coverage::kByRule);
  }
  if (!core || work.hidden <= 0) return -1.0;
  const double t = static_cast<double>(work.tokens);
  const double h = static_cast<double>(work.hidden);
  // The projections as one dense GEMM of t rows: FLOPs as counted, output t x h; the rest of the
  // op's bytes as extra input.
  GemmShape g;
  g.layout = GemmLayout::kDense;
  g.num_groups = 1;
  g.m_per_group = t;
  g.n = h;
  g.k = (work.flops - work.core_flops) / (2.0 * t * h);
  g.activation_bytes_per_element = 0;
  g.weight_bytes_per_element = 0;
  const double in_bytes = std::max(0.0, work.bytes - work.core_bytes - g.output_bytes());
  const double proj = gemm_seconds(g, work.dtype, in_bytes, coverage);
  const double core_peak = compute_peak_flops_per_s(gpu_, core_dtype);
  if (proj < 0 || !(core_peak > 0)) return -1.0;
  double pairs = work.attended_pairs;
  if (core->has_range() && pairs > 0) {
    const double keys_per_query = pairs / t;
    if (keys_per_query > core->keys_per_query_max) {
      // Rule: the rate at the most keys per query fitted (the rate saturates with keys).
      pairs = t * core->keys_per_query_max;
      worsen(coverage, Coverage::kByRule);
    } else if (keys_per_query < core->keys_per_query_min) {
      // Rule: the fit's fixed cost per query holds for fewer keys (the rate keeps falling).
      worsen(coverage, Coverage::kByRule);
    }
  }
  return proj +
         core->seconds(work.core_flops, work.core_bytes, pairs, t, core_peak, gpu_.hbm_bytes_per_s);
}

namespace {

// The kinds compute_seconds() prices from GEMM and attention-core fits.
bool compute_seconds_covers(OpKind kind) {
  switch (kind) {
    case OpKind::kExpertFfn:
    case OpKind::kSharedExpert:
    case OpKind::kDenseFfn:
    case OpKind::kAttnMlaPrefill:
    case OpKind::kAttnMlaDecode:
    case OpKind::kAttnGqaPrefill:
    case OpKind::kAttnGqaDecode:
    case OpKind::kAttnKdaPrefill:
    case OpKind::kAttnKdaDecode:
      return true;
    default:
      return false;
  }
}

}  // namespace

double CalibratedCostModel::compute_seconds(const OpWork& work, Coverage* coverage) const {
  if (profile_.compute.empty() || work.tokens <= 0) return -1.0;
  const double t = static_cast<double>(work.tokens);
  // FP8 (and narrower) GEMMs take FP8 activations; wider ones their own width.
  const double wb = bits_per_element(work.dtype) / 8.0;
  const double ab = std::max(1.0, std::min(2.0, wb));
  switch (work.kind) {
    case OpKind::kExpertFfn:
    case OpKind::kSharedExpert:
    case OpKind::kDenseFfn: {
      if (work.hidden <= 0 || work.ffn_intermediate <= 0) return -1.0;
      const double h = static_cast<double>(work.hidden);
      const double i = static_cast<double>(work.ffn_intermediate);
      GemmShape g;
      g.activation_bytes_per_element = ab;
      g.weight_bytes_per_element = wb;
      if (work.kind == OpKind::kExpertFfn) {
        g.num_groups = static_cast<double>(std::max<int64_t>(work.num_experts, 1));
        g.layout = GemmLayout::kContiguousGrouped;  // grouped; the fit picks by rows per group
      } else {
        g.num_groups = 1;
        g.layout = GemmLayout::kDense;
      }
      g.m_per_group = t / g.num_groups;
      GemmShape up = g, down = g;
      up.n = 2.0 * i;
      up.k = h;
      down.n = h;
      down.k = i;
      const double a = gemm_seconds(up, work.dtype, 0.0, coverage);
      const double b = gemm_seconds(down, work.dtype, 0.0, coverage);
      return a < 0 || b < 0 ? -1.0 : a + b;
    }
    case OpKind::kAttnMlaPrefill:
    case OpKind::kAttnMlaDecode:
    case OpKind::kAttnGqaPrefill:
    case OpKind::kAttnGqaDecode:
    case OpKind::kAttnKdaPrefill:
    case OpKind::kAttnKdaDecode:
      return attention_seconds(work, coverage);
    default:
      return -1.0;
  }
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
  if (s >= 0) {
    count(work.kind, in_range ? Coverage::kFitted : Coverage::kOutOfRange);
    return s;
  }
  // No op fit of the kind: the kernel-level fits, where they cover it.
  Coverage coverage = Coverage::kFitted;
  s = compute_seconds(work, &coverage);
  if (s >= 0) {
    count(work.kind, coverage);
    return s;
  }
  // Rule: a profile of kernel-level fits prices the kinds no kernel table covers (element-wise
  // ops, the router and the BF16 output head) by the roofline. A GEMM or attention kind without
  // its fit, or a kind missing from a profile of engine op fits, is out of range.
  const bool gemm_or_attention = compute_seconds_covers(work.kind);
  count(work.kind, !profile_.compute.empty() && !gemm_or_attention ? Coverage::kByRule
                                                                   : Coverage::kOutOfRange);
  return fallback_->seconds(work);
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

int64_t CalibratedCostModel::num_by_rule_queries(OpKind kind) const {
  return by_rule_[static_cast<int>(kind)].load(std::memory_order_relaxed);
}

CostQueryCounts CalibratedCostModel::query_counts() const {
  CostQueryCounts c;
  for (int k = 0; k < kNumOpKinds; ++k) {
    c.out_of_range[k] = out_of_range_[k].load(std::memory_order_relaxed);
    c.by_rule[k] = by_rule_[k].load(std::memory_order_relaxed);
  }
  return c;
}

}  // namespace moesim::sim

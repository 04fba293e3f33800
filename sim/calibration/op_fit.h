// Least-squares fit of one operation kind's duration against its work, with regimes.
//
// Model, per regime (a range of tokens): seconds = intercept_s + s_per_flop * flops +
// s_per_byte * bytes + s_per_token * tokens, using only the features the kind was asked to fit
// on. Coefficients are non-negative (a negative cost per FLOP is not physical and extrapolates
// badly): every subset of the features is solved and the best non-negative one kept. The fit
// minimises relative error (rows weighted by 1 / measured), because the report is in relative
// terms and op times span orders of magnitude.
//
// Regimes: the samples sorted by tokens are split at the breakpoint that most reduces the
// relative error, recursively up to `max_segments`, while each part keeps `min_samples_per_segment`
// samples and the split cuts the relative RMS error by at least `min_split_gain` (a fraction).
// This finds e.g. the small-batch latency floor of a GEMM or the change of grouped-GEMM
// efficiency with tokens per expert.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace moesim::sim {

enum class FitFeature { kFlops, kBytes, kTokens };
// "flops", "bytes", "tokens".
const char* fit_feature_name(FitFeature f);

struct FitSample {
  double flops = 0;
  double bytes = 0;
  double tokens = 0;
  double seconds = 0;  // measured, > 0
};

struct FitSegment {
  double tokens_max = std::numeric_limits<double>::infinity();  // inclusive upper bound
  double intercept_s = 0;
  double s_per_flop = 0;
  double s_per_byte = 0;
  double s_per_token = 0;
};

// Closed ranges of the samples a fit saw.
struct FitRange {
  double flops_min = 0, flops_max = 0;
  double bytes_min = 0, bytes_max = 0;
  double tokens_min = 0, tokens_max = 0;
};

// Relative errors are (predicted - measured) / measured.
struct FitQuality {
  int64_t num_samples = 0;
  double r2 = 0;                 // of seconds, 1 - SS_res / SS_tot (unweighted)
  double mape = 0;               // mean |relative error|
  double p50_abs_rel_error = 0;  // median |relative error|
  double p99_abs_rel_error = 0;
  double rms_residual_s = 0;
  double max_abs_residual_s = 0;
};

struct FitOptions {
  int32_t max_segments = 3;              // >= 1
  int32_t min_samples_per_segment = 12;  // >= 2
  double min_split_gain = 0.15;          // in (0, 1)
};

struct OpFit {
  std::string kind;                     // cost-model op kind name (op_kind_name) or "unpermute"
  std::string dtype;                    // e.g. "bf16"
  std::vector<std::string> engine_ops;  // measurement op names the fit was made from
  std::vector<FitFeature> features;
  std::vector<FitSegment> segments;  // ascending tokens_max, the last one +inf
  FitRange range;
  FitQuality quality;

  // Predicted seconds (>= 0) for work of this kind.
  double predict_s(double flops, double bytes, double tokens) const;
  // True when every fitted feature (and tokens, when there are several regimes) lies inside the
  // fitted range.
  bool in_range(double flops, double bytes, double tokens) const;
};

// Fits `samples` (at least 2, every seconds > 0). Throws std::invalid_argument on bad input.
OpFit fit_op(std::span<const FitSample> samples, std::vector<FitFeature> features,
             const FitOptions& options = {});

// Quality of `fit` on `samples` (any samples, e.g. held-out ones).
FitQuality evaluate_fit(const OpFit& fit, std::span<const FitSample> samples);

}  // namespace moesim::sim

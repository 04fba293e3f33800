// The fitted cost of one operation kind as a calibration profile stores it: per regime (a range
// of tokens) seconds = intercept_s + s_per_flop * flops + s_per_byte * bytes + s_per_token *
// tokens, the ranges the fit saw and its quality. Fitting lives in sim/calibration/op_fit.h;
// pricing with a fit (the calibrated cost model) only needs these types.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace moesim::sim {

enum class FitFeature { kFlops, kBytes, kTokens };
// "flops", "bytes", "tokens".
const char* fit_feature_name(FitFeature f);

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

}  // namespace moesim::sim

// Least-squares fit of one operation kind's duration against its work, with regimes.
//
// Per regime (a range of tokens): seconds = intercept + per-FLOP + per-byte + per-token terms,
// only the features asked for. Coefficients are non-negative (a negative cost per FLOP is not
// physical and extrapolates badly): every feature subset is solved and the best non-negative one
// kept. Rows are weighted by 1 / measured, since op times span orders of magnitude and the report
// is relative. Regimes split the samples, sorted by tokens, where that most cuts the relative
// error (a GEMM's small-batch latency floor, grouped-GEMM efficiency changing with tokens per
// expert). docs/calibration.md ("Fits") has the split rules.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "sim/cost/fit_types.h"

namespace moesim::sim {

struct FitSample {
  double flops = 0;
  double bytes = 0;
  double tokens = 0;
  double seconds = 0;  // measured, > 0
};

struct FitOptions {
  int32_t max_segments = 3;              // >= 1
  int32_t min_samples_per_segment = 12;  // >= 2
  double min_split_gain = 0.15;          // in (0, 1)
};

// Fits `samples` (at least 2, every seconds > 0). Throws std::invalid_argument on bad input.
OpFit fit_op(std::span<const FitSample> samples, std::vector<FitFeature> features,
             const FitOptions& options = {});

// Quality of `fit` on `samples` (any samples, e.g. held-out ones).
FitQuality evaluate_fit(const OpFit& fit, std::span<const FitSample> samples);

}  // namespace moesim::sim

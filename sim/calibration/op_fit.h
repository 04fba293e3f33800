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

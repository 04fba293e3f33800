#include "sim/cost/fit_types.h"

namespace moesim::sim {

const char* fit_feature_name(FitFeature f) {
  switch (f) {
    case FitFeature::kFlops:
      return "flops";
    case FitFeature::kBytes:
      return "bytes";
    case FitFeature::kTokens:
      return "tokens";
  }
  return "?";
}

double OpFit::predict_s(double flops, double bytes, double tokens) const {
  for (const FitSegment& s : segments) {
    if (tokens <= s.tokens_max || &s == &segments.back()) {
      return s.intercept_s + s.s_per_flop * flops + s.s_per_byte * bytes + s.s_per_token * tokens;
    }
  }
  return 0.0;
}

bool OpFit::in_range(double flops, double bytes, double tokens) const {
  // A relative slack of 1e-9 absorbs rounding of values written to and read from the profile.
  auto inside = [](double v, double lo, double hi) {
    return v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9);
  };
  for (FitFeature f : features) {
    switch (f) {
      case FitFeature::kFlops:
        if (!inside(flops, range.flops_min, range.flops_max)) return false;
        break;
      case FitFeature::kBytes:
        if (!inside(bytes, range.bytes_min, range.bytes_max)) return false;
        break;
      case FitFeature::kTokens:
        if (!inside(tokens, range.tokens_min, range.tokens_max)) return false;
        break;
    }
  }
  // With several regimes the regime is chosen by tokens, so tokens are part of the range.
  return segments.size() <= 1 || inside(tokens, range.tokens_min, range.tokens_max);
}

}  // namespace moesim::sim

#include "sim/calibration/op_fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "sim/calibration/error_stats.h"

namespace moesim::sim {
namespace {

double feature_value(FitFeature f, const FitSample& s) {
  switch (f) {
    case FitFeature::kFlops:
      return s.flops;
    case FitFeature::kBytes:
      return s.bytes;
    case FitFeature::kTokens:
      return s.tokens;
  }
  return 0;
}

struct SegmentSolution {
  FitSegment segment;
  double weighted_sse = 0;  // sum of squared relative errors
};

// Column 0 is the intercept, columns 1.. the features. Every non-empty subset of columns is
// solved by least squares on the relative-error rows; the best non-negative one wins.
SegmentSolution solve_segment(std::span<const FitSample> samples,
                              const std::vector<FitFeature>& features) {
  const int num_cols = 1 + static_cast<int>(features.size());
  const int n = static_cast<int>(samples.size());
  Eigen::MatrixXd a(n, num_cols);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
  std::vector<double> col_scale(num_cols, 1.0);
  for (int i = 0; i < n; ++i) {
    const double w = 1.0 / samples[i].seconds;
    a(i, 0) = w;
    for (int c = 1; c < num_cols; ++c) a(i, c) = w * feature_value(features[c - 1], samples[i]);
  }
  for (int c = 0; c < num_cols; ++c) {
    double m = a.col(c).cwiseAbs().maxCoeff();
    if (m > 0) {
      col_scale[c] = m;
      a.col(c) /= m;
    }
  }
  SegmentSolution best;
  best.weighted_sse = std::numeric_limits<double>::infinity();
  std::vector<double> coef(num_cols, 0.0);
  for (int mask = 1; mask < (1 << num_cols); ++mask) {
    std::vector<int> cols;
    for (int c = 0; c < num_cols; ++c) {
      if (mask & (1 << c)) cols.push_back(c);
    }
    Eigen::MatrixXd sub(n, static_cast<int>(cols.size()));
    for (size_t j = 0; j < cols.size(); ++j) sub.col(static_cast<int>(j)) = a.col(cols[j]);
    Eigen::VectorXd x = sub.colPivHouseholderQr().solve(b);
    if (!x.allFinite() || (x.array() < 0).any()) continue;
    double sse = (sub * x - b).squaredNorm();
    if (sse < best.weighted_sse) {
      best.weighted_sse = sse;
      std::fill(coef.begin(), coef.end(), 0.0);
      for (size_t j = 0; j < cols.size(); ++j)
        coef[cols[j]] = x(static_cast<int>(j)) / col_scale[cols[j]];
      best.segment = FitSegment{};
      best.segment.intercept_s = coef[0];
      for (int c = 1; c < num_cols; ++c) {
        switch (features[c - 1]) {
          case FitFeature::kFlops:
            best.segment.s_per_flop = coef[c];
            break;
          case FitFeature::kBytes:
            best.segment.s_per_byte = coef[c];
            break;
          case FitFeature::kTokens:
            best.segment.s_per_token = coef[c];
            break;
        }
      }
    }
  }
  if (!std::isfinite(best.weighted_sse)) {
    // Only reachable when every subset is infeasible, which the intercept-only subset never is
    // (its solution is a weighted mean of positive times); kept as a guard.
    throw std::invalid_argument("no non-negative least-squares solution");
  }
  return best;
}

struct Part {
  size_t begin = 0, end = 0;  // [begin, end) into the sorted samples
  SegmentSolution solution;
};

// Indices i in (begin, end) where a split between i - 1 and i separates distinct token counts
// and leaves min_samples on each side; at most ~32 of them, evenly spaced.
std::vector<size_t> split_candidates(std::span<const FitSample> sorted, const Part& p,
                                     size_t min_samples) {
  std::vector<size_t> all;
  for (size_t i = p.begin + min_samples; i + min_samples <= p.end; ++i) {
    if (sorted[i].tokens > sorted[i - 1].tokens) all.push_back(i);
  }
  if (all.size() <= 32) return all;
  std::vector<size_t> picked;
  for (size_t k = 0; k < 32; ++k) picked.push_back(all[k * all.size() / 32]);
  return picked;
}

}  // namespace

FitQuality evaluate_fit(const OpFit& fit, std::span<const FitSample> samples) {
  std::vector<double> measured, predicted;
  measured.reserve(samples.size());
  predicted.reserve(samples.size());
  for (const FitSample& s : samples) {
    measured.push_back(s.seconds);
    predicted.push_back(fit.predict_s(s.flops, s.bytes, s.tokens));
  }
  ErrorStats e = compute_error_stats(measured, predicted);
  FitQuality q;
  q.num_samples = e.num_samples;
  q.mape = e.mape;
  q.p50_abs_rel_error = e.p50_abs_rel_error;
  q.p99_abs_rel_error = e.p99_abs_rel_error;
  q.r2 = e.r2;
  q.rms_residual_s = e.rms_abs_error_s;
  q.max_abs_residual_s = e.max_abs_error_s;
  return q;
}

OpFit fit_op(std::span<const FitSample> samples, std::vector<FitFeature> features,
             const FitOptions& options) {
  if (samples.size() < 2) throw std::invalid_argument("fit_op needs at least 2 samples");
  for (const FitSample& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds)) {
      throw std::invalid_argument("fit_op: measured seconds must be positive");
    }
  }
  std::vector<FitSample> sorted(samples.begin(), samples.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const FitSample& x, const FitSample& y) { return x.tokens < y.tokens; });
  OpFit fit;
  fit.features = features;
  FitRange& r = fit.range;
  r.flops_min = r.bytes_min = r.tokens_min = std::numeric_limits<double>::infinity();
  r.flops_max = r.bytes_max = r.tokens_max = -std::numeric_limits<double>::infinity();
  for (const FitSample& s : sorted) {
    r.flops_min = std::min(r.flops_min, s.flops);
    r.flops_max = std::max(r.flops_max, s.flops);
    r.bytes_min = std::min(r.bytes_min, s.bytes);
    r.bytes_max = std::max(r.bytes_max, s.bytes);
    r.tokens_min = std::min(r.tokens_min, s.tokens);
    r.tokens_max = std::max(r.tokens_max, s.tokens);
  }

  std::span<const FitSample> all(sorted);
  const size_t min_samples = static_cast<size_t>(std::max(2, options.min_samples_per_segment));
  std::vector<Part> parts;
  parts.push_back(Part{0, sorted.size(), solve_segment(all, features)});
  while (static_cast<int32_t>(parts.size()) < std::max(1, options.max_segments)) {
    double total_sse = 0;
    for (const Part& p : parts) total_sse += p.solution.weighted_sse;
    double best_total = total_sse;
    size_t best_part = 0, best_at = 0;
    SegmentSolution best_left, best_right;
    for (size_t pi = 0; pi < parts.size(); ++pi) {
      const Part& p = parts[pi];
      for (size_t at : split_candidates(all, p, min_samples)) {
        SegmentSolution left = solve_segment(all.subspan(p.begin, at - p.begin), features);
        SegmentSolution right = solve_segment(all.subspan(at, p.end - at), features);
        double t = total_sse - p.solution.weighted_sse + left.weighted_sse + right.weighted_sse;
        if (t < best_total) {
          best_total = t;
          best_part = pi;
          best_at = at;
          best_left = left;
          best_right = right;
        }
      }
    }
    // A fit already exact to 1e-6 relative RMS has nothing left to explain (splitting it would
    // only chase rounding noise).
    if (best_at == 0 || total_sse <= 1e-12 * static_cast<double>(sorted.size()) ||
        std::sqrt(best_total / total_sse) > 1.0 - options.min_split_gain) {
      break;
    }
    Part p = parts[best_part];
    parts[best_part] = Part{p.begin, best_at, best_left};
    parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(best_part) + 1,
                 Part{best_at, p.end, best_right});
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    FitSegment s = parts[i].solution.segment;
    s.tokens_max = i + 1 < parts.size() ? sorted[parts[i].end - 1].tokens
                                        : std::numeric_limits<double>::infinity();
    fit.segments.push_back(s);
  }
  fit.quality = evaluate_fit(fit, sorted);
  return fit;
}

}  // namespace moesim::sim

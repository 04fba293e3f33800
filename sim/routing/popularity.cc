#include "sim/routing/popularity.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "sim/core/distributions.h"

namespace moesim::sim {
namespace {

void normalize_with_floor(std::span<double> w) {
  double max_w = 0.0;
  for (double v : w) max_w = std::max(max_w, v);
  MOESIM_CHECK(max_w > 0.0, "popularity needs a positive weight");
  const double floor_w = max_w * kMinRelativePopularity;
  double sum = 0.0;
  for (double& v : w) {
    v = std::max(v, floor_w);
    sum += v;
  }
  for (double& v : w) v /= sum;
}

}  // namespace

void random_permutation(RngStream& rng, std::span<int32_t> out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(i);
  for (size_t i = out.size(); i > 1; --i) {
    const size_t j = rng.uniform_int(i);
    std::swap(out[i - 1], out[j]);
  }
}

std::vector<double> zipf_weights(size_t n, double s) {
  std::vector<double> w(n);
  for (size_t rank = 0; rank < n; ++rank) w[rank] = std::pow(static_cast<double>(rank + 1), -s);
  return w;
}

void draw_popularity(const LayerSkewSpec& skew, RngStream& rng, std::span<double> out) {
  const std::vector<double> zipf_table = skew.popularity == PopularityKind::kZipf
                                             ? zipf_weights(out.size(), skew.zipf_s)
                                             : std::vector<double>();
  draw_popularity(skew, rng, out, zipf_table);
}

void draw_popularity(const LayerSkewSpec& skew, RngStream& rng, std::span<double> out,
                     std::span<const double> zipf_table) {
  const size_t n = out.size();
  MOESIM_CHECK(n > 0, "popularity needs experts");
  switch (skew.popularity) {
    case PopularityKind::kUniform:
      for (double& v : out) v = 1.0 / static_cast<double>(n);
      return;
    case PopularityKind::kZipf: {
      std::vector<int32_t> perm(n);
      random_permutation(rng, perm);
      MOESIM_CHECK(zipf_table.size() == n, "one Zipf weight per expert");
      for (size_t rank = 0; rank < n; ++rank) out[perm[rank]] = zipf_table[rank];
      break;
    }
    case PopularityKind::kDirichlet: {
      const std::vector<double> alphas(n, skew.dirichlet_alpha);
      const std::vector<double> d = dirichlet(rng, alphas);
      std::copy(d.begin(), d.end(), out.begin());
      break;
    }
  }
  normalize_with_floor(out);
}

double exponential_race_time(std::span<const double> rates, double k) {
  if (k <= 0.0) return 0.0;
  size_t num_positive = 0;
  for (double r : rates) num_positive += r > 0.0 ? 1 : 0;
  MOESIM_CHECK(k <= static_cast<double>(num_positive), "race needs k <= positive rates");
  if (k >= static_cast<double>(num_positive)) return INFINITY;
  // Newton from t = 0 on the concave increasing f(t) = sum (1 - exp(-r t)) converges
  // monotonically from below.
  double t = 0.0;
  for (int iter = 0; iter < 200; ++iter) {
    double f = 0.0;
    double df = 0.0;
    for (double r : rates) {
      const double e = std::exp(-r * t);
      f += 1.0 - e;
      df += r * e;
    }
    const double step = (k - f) / df;
    t += step;
    if (step <= t * 1e-12) break;
  }
  return t;
}

void selection_shares(const RoutingShape& shape, std::span<const double> popularity,
                      std::span<double> pi_out, double num_picks) {
  const int32_t num_experts = shape.num_experts;
  MOESIM_CHECK(popularity.size() == static_cast<size_t>(num_experts), "popularity size");
  MOESIM_CHECK(pi_out.size() == popularity.size(), "pi size");
  const int32_t per_group = shape.experts_per_group();
  std::vector<double> group_pi(shape.num_groups, 1.0);
  if (shape.topk_groups < shape.num_groups) {
    std::vector<double> group_w(shape.num_groups, 0.0);
    for (int32_t e = 0; e < num_experts; ++e) group_w[e / per_group] += popularity[e];
    const double t = exponential_race_time(group_w, shape.topk_groups);
    for (int32_t g = 0; g < shape.num_groups; ++g) group_pi[g] = -std::expm1(-group_w[g] * t);
  }
  // Mean field: expert e is available with probability group_pi[g(e)]; solve
  // sum_e group_pi[g(e)] * (1 - exp(-w_e t)) = k by Newton (concave, increasing).
  const double k = num_picks < 0.0 ? shape.top_k : num_picks;
  double available = 0.0;
  for (int32_t e = 0; e < num_experts; ++e) available += group_pi[e / per_group];
  if (k >= available * (1.0 - 1e-12)) {
    for (int32_t e = 0; e < num_experts; ++e) pi_out[e] = group_pi[e / per_group];
  } else {
    double t = 0.0;
    for (int iter = 0; iter < 200; ++iter) {
      double f = 0.0;
      double df = 0.0;
      for (int32_t e = 0; e < num_experts; ++e) {
        const double a = group_pi[e / per_group];
        const double ex = std::exp(-popularity[e] * t);
        f += a * (1.0 - ex);
        df += a * popularity[e] * ex;
      }
      const double step = (k - f) / df;
      t += step;
      if (step <= t * 1e-12) break;
    }
    for (int32_t e = 0; e < num_experts; ++e) {
      pi_out[e] = group_pi[e / per_group] * -std::expm1(-popularity[e] * t);
    }
  }
  // Remove the residual of the iteration so that the shares sum to top_k exactly.
  double sum = 0.0;
  for (double v : pi_out) sum += v;
  for (double& v : pi_out) v *= k / sum;
}

void coactivated_selection_shares(const RoutingShape& shape, std::span<const double> popularity,
                                  double prob, int32_t cluster_size,
                                  std::span<const int32_t> cluster_of_expert,
                                  std::span<double> pi_out) {
  const double k = shape.top_k;
  if (prob <= 0.0 || shape.top_k <= 1 || cluster_size < 2) {
    selection_shares(shape, popularity, pi_out);
    return;
  }
  MOESIM_CHECK(cluster_of_expert.size() == pi_out.size(), "one cluster index per expert");
  const double mate_picks = prob * (k - 1.0);
  selection_shares(shape, popularity, pi_out, k - mate_picks);
  const double beta = mate_picks / ((cluster_size - 1) * k);
  std::vector<double> cluster_pi(pi_out.size(), 0.0);
  for (size_t e = 0; e < pi_out.size(); ++e) cluster_pi[cluster_of_expert[e]] += pi_out[e];
  for (double& c : cluster_pi) c /= 1.0 - mate_picks / k;
  for (size_t e = 0; e < pi_out.size(); ++e) {
    pi_out[e] = (pi_out[e] + beta * cluster_pi[cluster_of_expert[e]]) / (1.0 + beta);
  }
  // An expert cannot be picked twice by one token: cap at 1, spread the excess.
  for (int iter = 0; iter < 64; ++iter) {
    double excess = 0.0;
    double open = 0.0;
    for (double& p : pi_out) {
      if (p > 1.0) {
        excess += p - 1.0;
        p = 1.0;
      } else if (p < 1.0) {
        open += p;
      }
    }
    if (excess <= 1e-12 || open <= 0.0) break;
    for (double& p : pi_out) {
      if (p < 1.0) p += excess * p / open;
    }
  }
}

}  // namespace moesim::sim

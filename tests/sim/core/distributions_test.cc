#include "sim/core/distributions.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

namespace moesim::sim {
namespace {

// Sample mean and variance with their standard errors estimated from the sample itself, so that
// the tolerance scales with each distribution's tails.
struct Moments {
  double mean = 0.0;
  double var = 0.0;
  double mean_se = 0.0;
  double var_se = 0.0;
};

Moments moments_of(const std::vector<double>& xs) {
  const double n = static_cast<double>(xs.size());
  double sum = 0.0;
  for (double x : xs) sum += x;
  Moments m;
  m.mean = sum / n;
  double m2 = 0.0;
  double m4 = 0.0;
  for (double x : xs) {
    const double d = x - m.mean;
    m2 += d * d;
    m4 += d * d * d * d;
  }
  m2 /= n;
  m4 /= n;
  m.var = m2 * n / (n - 1.0);
  m.mean_se = std::sqrt(m2 / n);
  m.var_se = std::sqrt(std::max(m4 - m2 * m2, 0.0) / n);
  return m;
}

constexpr double kSigmas = 5.0;

void expect_moments(const std::function<double()>& draw, int n, double mean, double var) {
  std::vector<double> xs(n);
  for (double& x : xs) x = draw();
  const Moments m = moments_of(xs);
  EXPECT_NEAR(m.mean, mean, kSigmas * m.mean_se) << "mean";
  EXPECT_NEAR(m.var, var, kSigmas * m.var_se) << "variance";
}

TEST(Distributions, Uniform) {
  RngStream rng(1, "uniform");
  expect_moments([&] { return uniform(rng, 2.0, 5.0); }, 1'000'000, 3.5, 0.75);
  EXPECT_EQ(uniform(rng, 4.0, 4.0), 4.0);
}

TEST(Distributions, Exponential) {
  RngStream rng(1, "exponential");
  expect_moments([&] { return exponential(rng, 4.0); }, 1'000'000, 0.25, 0.0625);
}

TEST(Distributions, Normal) {
  RngStream rng(1, "normal");
  expect_moments([&] { return normal(rng, 1.0, 2.0); }, 1'000'000, 1.0, 4.0);
}

TEST(Distributions, Lognormal) {
  RngStream rng(1, "lognormal");
  const double mu = 0.5;
  const double sigma = 0.5;
  const double mean = std::exp(mu + sigma * sigma / 2);
  const double var = (std::exp(sigma * sigma) - 1) * std::exp(2 * mu + sigma * sigma);
  expect_moments([&] { return lognormal(rng, mu, sigma); }, 1'000'000, mean, var);
}

TEST(Distributions, GammaSmallUnitAndLargeShape) {
  for (double shape : {0.5, 1.0, 5.0}) {
    SCOPED_TRACE(shape);
    RngStream rng(1, "gamma_" + std::to_string(shape));
    const double scale = 2.0;
    expect_moments([&] { return gamma(rng, shape, scale); }, 1'000'000, shape * scale,
                   shape * scale * scale);
  }
}

TEST(Distributions, PoissonAcrossMeans) {
  for (double mean : {0.5, 4.0, 30.0, 1000.0}) {
    SCOPED_TRACE(mean);
    RngStream rng(1, "poisson_" + std::to_string(mean));
    expect_moments([&] { return static_cast<double>(poisson(rng, mean)); }, 500'000, mean, mean);
  }
  RngStream rng(1, "poisson_zero");
  EXPECT_EQ(poisson(rng, 0.0), 0);
}

// PTRS has to reproduce the pmf, not only the first two moments.
TEST(Distributions, PoissonPtrsMatchesPmf) {
  RngStream rng(2, "poisson_pmf");
  const double mean = 30.0;
  const int n = 1'000'000;
  std::vector<int64_t> counts(200, 0);
  for (int i = 0; i < n; ++i) ++counts[std::min<int64_t>(poisson(rng, mean), 199)];
  for (int k = 15; k <= 45; ++k) {
    const double pmf = std::exp(-mean + k * std::log(mean) - std::lgamma(k + 1.0));
    const double se = std::sqrt(pmf * (1 - pmf) / n);
    EXPECT_NEAR(static_cast<double>(counts[k]) / n, pmf, kSigmas * se) << "k=" << k;
  }
}

TEST(Distributions, BinomialSmallAndLarge) {
  struct Case {
    int64_t n;
    double p;
  };
  // Inversion (n*p < 10), inversion by symmetry (p > 0.5), BTRS, BTRS by symmetry.
  for (Case c : {Case{20, 0.1}, Case{50, 0.9}, Case{1000, 0.3}, Case{100000, 0.7}}) {
    SCOPED_TRACE(std::to_string(c.n) + " " + std::to_string(c.p));
    RngStream rng(1, "binomial_" + std::to_string(c.n));
    int64_t max_seen = 0;
    expect_moments(
        [&] {
          const int64_t k = binomial(rng, c.n, c.p);
          max_seen = std::max(max_seen, k);
          return static_cast<double>(k);
        },
        500'000, c.n * c.p, c.n * c.p * (1 - c.p));
    EXPECT_LE(max_seen, c.n);
  }
  RngStream rng(1, "binomial_edges");
  EXPECT_EQ(binomial(rng, 0, 0.5), 0);
  EXPECT_EQ(binomial(rng, 10, 0.0), 0);
  EXPECT_EQ(binomial(rng, 10, 1.0), 10);
}

TEST(Distributions, BinomialBtrsMatchesPmf) {
  RngStream rng(2, "binomial_pmf");
  const int64_t trials = 200;
  const double p = 0.25;
  const int n = 1'000'000;
  std::vector<int64_t> counts(trials + 1, 0);
  for (int i = 0; i < n; ++i) ++counts[binomial(rng, trials, p)];
  for (int k = 35; k <= 65; ++k) {
    const double log_pmf = std::lgamma(trials + 1.0) - std::lgamma(k + 1.0) -
                           std::lgamma(trials - k + 1.0) + k * std::log(p) +
                           (trials - k) * std::log1p(-p);
    const double pmf = std::exp(log_pmf);
    const double se = std::sqrt(pmf * (1 - pmf) / n);
    EXPECT_NEAR(static_cast<double>(counts[k]) / n, pmf, kSigmas * se) << "k=" << k;
  }
}

TEST(Distributions, ZipfEmpiricalMatchesPmf) {
  RngStream rng(1, "zipf");
  ZipfDistribution zipf(10, 1.1);
  EXPECT_EQ(zipf.size(), 10);
  double total = 0.0;
  for (int64_t k = 0; k < 10; ++k) total += std::pow(k + 1.0, -1.1);
  const int n = 1'000'000;
  std::vector<int64_t> counts(10, 0);
  for (int i = 0; i < n; ++i) ++counts[zipf.sample(rng)];
  for (int64_t k = 0; k < 10; ++k) {
    const double pmf = std::pow(k + 1.0, -1.1) / total;
    EXPECT_NEAR(zipf.probability(k), pmf, 1e-12);
    const double se = std::sqrt(pmf * (1 - pmf) / n);
    EXPECT_NEAR(static_cast<double>(counts[k]) / n, pmf, kSigmas * se) << "k=" << k;
  }
}

TEST(Distributions, CategoricalMatchesWeights) {
  RngStream rng(1, "categorical");
  const std::vector<double> weights = {1.0, 0.0, 3.0, 6.0, 0.5};
  CategoricalDistribution cat(weights);
  ASSERT_EQ(cat.size(), weights.size());
  const double total = 10.5;
  const int n = 1'000'000;
  std::vector<int64_t> counts(weights.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[cat.sample(rng)];
  EXPECT_EQ(counts[1], 0);
  for (size_t i = 0; i < weights.size(); ++i) {
    const double p = weights[i] / total;
    EXPECT_NEAR(cat.probability(i), p, 1e-15);
    const double se = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(static_cast<double>(counts[i]) / n, p, kSigmas * se + 1e-12) << i;
  }
}

TEST(Distributions, DirichletMeansAndSumToOne) {
  RngStream rng(1, "dirichlet");
  const std::vector<double> alphas = {0.5, 1.0, 2.0, 4.5};
  const double alpha0 = 8.0;
  const int n = 200'000;
  std::vector<std::vector<double>> columns(alphas.size(), std::vector<double>(n));
  for (int i = 0; i < n; ++i) {
    const std::vector<double> x = dirichlet(rng, alphas);
    ASSERT_EQ(x.size(), alphas.size());
    ASSERT_NEAR(std::accumulate(x.begin(), x.end(), 0.0), 1.0, 1e-12);
    for (size_t j = 0; j < x.size(); ++j) columns[j][i] = x[j];
  }
  for (size_t j = 0; j < alphas.size(); ++j) {
    const Moments m = moments_of(columns[j]);
    const double a = alphas[j];
    EXPECT_NEAR(m.mean, a / alpha0, kSigmas * m.mean_se) << j;
    const double var = a * (alpha0 - a) / (alpha0 * alpha0 * (alpha0 + 1));
    EXPECT_NEAR(m.var, var, kSigmas * m.var_se) << j;
  }
}

// Tiny concentrations make Gamma draws underflow in linear space; the result must still be a
// finite point of the simplex.
TEST(Distributions, DirichletTinyConcentrationsStayFinite) {
  RngStream rng(1, "dirichlet_tiny");
  const std::vector<double> alphas(16, 0.002);
  for (int i = 0; i < 1000; ++i) {
    const std::vector<double> x = dirichlet(rng, alphas);
    double sum = 0.0;
    for (double v : x) {
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_GE(v, 0.0);
      sum += v;
    }
    ASSERT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(Distributions, MultinomialSumsToNWithPerCategoryMeans) {
  RngStream rng(1, "multinomial");
  const std::vector<double> probs = {1.0, 2.0, 0.0, 3.0, 4.0};  // not normalised
  const int64_t trials = 1000;
  const int n = 200'000;
  std::vector<std::vector<double>> columns(probs.size(), std::vector<double>(n));
  std::vector<int64_t> counts(probs.size());
  for (int i = 0; i < n; ++i) {
    multinomial(rng, trials, probs, counts);
    ASSERT_EQ(std::accumulate(counts.begin(), counts.end(), int64_t{0}), trials);
    ASSERT_EQ(counts[2], 0);
    for (size_t j = 0; j < probs.size(); ++j) columns[j][i] = static_cast<double>(counts[j]);
  }
  for (size_t j = 0; j < probs.size(); ++j) {
    const double p = probs[j] / 10.0;
    const Moments m = moments_of(columns[j]);
    EXPECT_NEAR(m.mean, trials * p, kSigmas * m.mean_se + 1e-12) << j;
    EXPECT_NEAR(m.var, trials * p * (1 - p), kSigmas * m.var_se + 1e-12) << j;
  }
  // The last positive category absorbs the remainder even when trailing weights are zero.
  const std::vector<double> trailing_zero = {1.0, 1.0, 0.0};
  std::vector<int64_t> c3(3);
  multinomial(rng, 17, trailing_zero, c3);
  EXPECT_EQ(c3[0] + c3[1], 17);
  EXPECT_EQ(c3[2], 0);
}

TEST(Distributions, PreparedMultinomialDrawsWhatMultinomialDraws) {
  // Same stream, same counts, bit for bit: zero weights (leading, inner, trailing), a category
  // that takes more than half of what is left (the complement draw), inversion (small n p) and
  // BTRS (large n p) draws, and n = 0.
  const std::vector<std::vector<double>> vectors = {
      {1.0, 2.0, 0.0, 3.0, 4.0}, {0.0, 0.7, 0.1, 0.1, 0.1, 0.0}, {5.0, 1e-9, 1.0}, {1.0},
      {0.25, 0.25, 0.25, 0.25},
  };
  for (size_t v = 0; v < vectors.size(); ++v) {
    const PreparedMultinomial prepared(vectors[v]);
    ASSERT_EQ(prepared.size(), vectors[v].size());
    RngStream a(11, "prepared");
    RngStream b(11, "prepared");
    std::vector<int64_t> want(vectors[v].size());
    std::vector<int64_t> got(vectors[v].size());
    for (const int64_t n : {0, 1, 3, 17, 40, 1000, 250'000}) {
      for (int rep = 0; rep < 200; ++rep) {
        multinomial(a, n, vectors[v], want);
        prepared.draw(b, n, got);
        ASSERT_EQ(want, got) << "vector " << v << " n " << n;
      }
    }
    EXPECT_EQ(a.next_u64(), b.next_u64()) << "vector " << v;  // the streams are in step
  }
}

TEST(Distributions, CandidateMultinomialDrawsItsCandidatesAsTheMultinomialDoes) {
  // Shares of 16 GPUs, two of them tied at the top. The candidates are drawn exactly: their
  // counts' means and variances are the multinomial's; the others get their share of what is
  // left, and every draw sums to n.
  std::vector<double> probs(16);
  for (size_t i = 0; i < probs.size(); ++i) probs[i] = 1.0 / static_cast<double>(i + 1);
  probs[5] = probs[0];  // tied with the likeliest
  CandidateMultinomial cm(probs);
  ASSERT_EQ(cm.size(), probs.size());
  const int64_t n = 200'000;
  const size_t k = cm.num_candidates(n, 1e-6);
  ASSERT_GE(k, 2u);  // the tie is a candidate
  ASSERT_LT(k, probs.size());
  const double total = std::accumulate(probs.begin(), probs.end(), 0.0);
  RngStream rng(3, "candidates");
  std::vector<int64_t> counts(probs.size());
  const int kDraws = 4000;
  std::vector<double> sum(probs.size(), 0.0), sum_sq(probs.size(), 0.0);
  for (int d = 0; d < kDraws; ++d) {
    cm.draw(rng, n, k, counts);
    ASSERT_EQ(std::accumulate(counts.begin(), counts.end(), int64_t{0}), n);
    for (size_t i = 0; i < counts.size(); ++i) {
      ASSERT_GE(counts[i], 0);
      sum[i] += static_cast<double>(counts[i]);
      sum_sq[i] += static_cast<double>(counts[i]) * static_cast<double>(counts[i]);
    }
  }
  // Candidates by decreasing probability (ties: lower index first): 0, 5, 1, 2, ...
  std::vector<size_t> order = {0, 5, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  for (size_t j = 0; j < probs.size(); ++j) {
    const size_t i = order[j];
    const double p = probs[i] / total;
    const double mean = sum[i] / kDraws;
    const double var = sum_sq[i] / kDraws - mean * mean;
    const double want_var = static_cast<double>(n) * p * (1 - p);
    // The mean within 5 standard errors, the variance within 15% (4,000 draws).
    EXPECT_NEAR(mean, static_cast<double>(n) * p, 5 * std::sqrt(want_var / kDraws)) << i;
    if (j < k) {
      EXPECT_NEAR(var, want_var, 0.15 * want_var) << "candidate " << i;
    } else {
      // What the candidates left, split by share: far less spread than the multinomial's.
      EXPECT_LT(var, 0.5 * want_var) << "non-candidate " << i;
    }
  }
}

TEST(Distributions, CandidateMultinomialBoundsTheOthersAway) {
  // The candidate count's promise, checked against the full multinomial: at epsilon, a category
  // outside the candidates draws at least as many trials as the likeliest one in at most an
  // epsilon share of draws (Bernstein's bound is loose: far fewer in practice).
  const std::vector<double> probs = {0.1,   0.09, 0.085, 0.08,  0.08, 0.075, 0.07, 0.07,
                                     0.065, 0.06, 0.06,  0.055, 0.05, 0.04,  0.02, 0.01};
  CandidateMultinomial cm(probs);
  RngStream rng(9, "bound");
  std::vector<int64_t> counts(probs.size());
  for (const int64_t n : {2'000, 20'000, 200'000}) {
    for (const double epsilon : {0.2, 0.01}) {
      const size_t k = cm.num_candidates(n, epsilon);
      ASSERT_GE(k, 1u);
      int exceeded = 0;
      const int kDraws = 5000;
      for (int d = 0; d < kDraws; ++d) {
        multinomial(rng, n, probs, counts);
        // Categories are already in decreasing order of probability.
        for (size_t j = k; j < probs.size(); ++j) {
          if (counts[j] >= counts[0]) {
            ++exceeded;
            break;
          }
        }
      }
      EXPECT_LE(exceeded, epsilon * kDraws) << "n " << n << " epsilon " << epsilon;
    }
  }
  // More trials separate the categories: the candidates do not grow with n; with few trials
  // nothing is bounded away.
  size_t last = probs.size();
  for (const int64_t n : {10, 1'000, 10'000, 100'000, 1'000'000, 100'000'000}) {
    const size_t k = cm.num_candidates(n, 1e-6);
    EXPECT_LE(k, last) << n;
    last = k;
  }
  EXPECT_EQ(cm.num_candidates(10, 1e-6), probs.size());
  EXPECT_EQ(cm.num_candidates(100'000'000, 1e-6), 1u);
  EXPECT_EQ(cm.num_candidates(0, 1e-6), probs.size());
}

TEST(Distributions, CandidateMultinomialWithEveryCategoryACandidateIsTheMultinomial) {
  // k = m draws the ordered multinomial: same counts from the same stream as multinomial() over
  // the probabilities sorted by decreasing value.
  const std::vector<double> probs = {0.1, 0.4, 0.0, 0.2, 0.3};
  const std::vector<double> sorted = {0.4, 0.3, 0.2, 0.1, 0.0};
  const std::vector<size_t> order = {1, 4, 3, 0, 2};
  CandidateMultinomial cm(probs);
  RngStream a(4, "all"), b(4, "all");
  std::vector<int64_t> got(5), want(5);
  for (const int64_t n : {0, 7, 5000}) {
    cm.draw(a, n, cm.size(), got);
    multinomial(b, n, sorted, want);
    for (size_t j = 0; j < order.size(); ++j) EXPECT_EQ(got[order[j]], want[j]) << n;
  }
}

TEST(Distributions, SameStreamStateGivesSameDraws) {
  RngStream a(5, "same");
  RngStream b(5, "same");
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(gamma(a, 0.7, 1.0), gamma(b, 0.7, 1.0));
    ASSERT_EQ(poisson(a, 250.0), poisson(b, 250.0));
    ASSERT_EQ(binomial(a, 5000, 0.4), binomial(b, 5000, 0.4));
  }
}

}  // namespace
}  // namespace moesim::sim

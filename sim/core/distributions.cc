// Distributions drawn from RngStream only, with algorithms fixed here so that results are
// identical on every platform (up to the libm functions log, exp, pow, lgamma).
//
// Algorithms: normal by Marsaglia's polar method; gamma by Marsaglia & Tsang (2000), with
// shape < 1 boosted as Gamma(k + 1) * U^(1/k) computed in log space so that tiny shapes do not
// underflow a Dirichlet; Poisson by sequential inversion below mean 10 and PTRS (Hörmann 1993)
// above; binomial by inversion when n * min(p, 1 - p) < 10, BTRS (Hörmann 1993) otherwise;
// categorical by Vose's alias method.
#include "sim/core/distributions.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace moesim::sim {
namespace {

// ln Gamma(x) without std::lgamma's write of the global signgam, a data race when simulations
// run on several threads (sweeps and searches); the same value (glibc's lgamma_r).
double log_gamma(double x) {
  int sign = 0;
  return lgamma_r(x, &sign);
}

constexpr double kInversionThreshold = 10.0;

// Multinomial by conditional binomials: suffix[i] = probs[i] + ... + probs[end - 1] (size
// probs.size() + 1), with the multinomial's preconditions checked.
void fill_suffix_sums(std::span<const double> probs, std::vector<double>& suffix) {
  suffix.assign(probs.size() + 1, 0.0);
  for (size_t i = probs.size(); i-- > 0;) {
    MOESIM_CHECK(probs[i] >= 0.0, "multinomial probabilities must be >= 0");
    suffix[i] = suffix[i + 1] + probs[i];
  }
  MOESIM_CHECK(suffix[0] > 0.0, "multinomial probabilities must have a positive sum");
}

// The probability of category i given that a trial lands in i..end; the last category with
// positive probability takes all remaining trials (1).
double conditional_probability(std::span<const double> probs, const std::vector<double>& suffix,
                               size_t i) {
  return suffix[i + 1] == 0.0 ? 1.0 : std::min(1.0, probs[i] / suffix[i]);
}

// ln(k!) = ln Gamma(k + 1) for an integer-valued k >= 0: BTRS's rejection test takes four per
// draw. Below 2^14 from a table built once (its entries are log_gamma's values, so the draws are
// the same), above from log_gamma.
double log_factorial(double k) {
  constexpr int32_t kTableSize = 1 << 14;
  static const std::vector<double> table = [] {
    std::vector<double> t(kTableSize);
    for (int32_t i = 0; i < kTableSize; ++i) t[i] = log_gamma(static_cast<double>(i) + 1.0);
    return t;
  }();
  return k < kTableSize ? table[static_cast<size_t>(k)] : log_gamma(k + 1.0);
}

// Standard normal by the polar method.
double standard_normal(RngStream& rng) {
  while (true) {
    const double u = 2.0 * rng.uniform01() - 1.0;
    const double v = 2.0 * rng.uniform01() - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * std::log(s) / s);
  }
}

// Gamma(shape >= 1, scale 1) by Marsaglia & Tsang.
double gamma_shape_ge1(RngStream& rng, double shape) {
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x;
    double v;
    do {
      x = standard_normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = rng.uniform01_open();
    const double x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2) return d * v;
    if (std::log(u) < 0.5 * x2 + d * (1.0 - v + std::log(v))) return d * v;
  }
}

// log of a Gamma(shape, 1) draw; finite even when the draw itself would underflow.
double log_gamma_variate(RngStream& rng, double shape) {
  if (shape >= 1.0) return std::log(gamma_shape_ge1(rng, shape));
  const double g = gamma_shape_ge1(rng, shape + 1.0);
  return std::log(g) + std::log(rng.uniform01_open()) / shape;
}

int64_t poisson_inversion(RngStream& rng, double mean) {
  const double p0 = std::exp(-mean);
  while (true) {
    const double u = rng.uniform01();
    double p = p0;
    double cdf = p0;
    int64_t k = 0;
    // Once p underflows the cumulative sum can no longer grow: redraw (probability ~1e-16).
    while (u > cdf && p > 0.0) {
      ++k;
      p *= mean / static_cast<double>(k);
      cdf += p;
    }
    if (u <= cdf) return k;
  }
}

// PTRS: transformed rejection with squeeze (Hörmann 1993), for mean >= 10.
int64_t poisson_ptrs(RngStream& rng, double mean) {
  const double log_mean = std::log(mean);
  const double b = 0.931 + 2.53 * std::sqrt(mean);
  const double a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
  const double v_r = 0.9277 - 3.6224 / (b - 2.0);
  while (true) {
    const double u = rng.uniform01() - 0.5;
    const double v = rng.uniform01_open();
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2.0 * a / us + b) * u + mean + 0.43);
    if (us >= 0.07 && v <= v_r) return static_cast<int64_t>(k);
    if (k < 0.0 || (us < 0.013 && v > us)) continue;
    const double lhs = std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b);
    const double rhs = -mean + k * log_mean - log_factorial(k);
    if (lhs <= rhs) return static_cast<int64_t>(k);
  }
}

// Binomial by sequential inversion; p <= 0.5 and n * p < 10; log1p_neg_p = log1p(-p).
int64_t binomial_inversion(RngStream& rng, int64_t n, double p, double log1p_neg_p) {
  const double q = 1.0 - p;
  const double q_n = std::exp(static_cast<double>(n) * log1p_neg_p);
  const double np = static_cast<double>(n) * p;
  const double bound = std::min(static_cast<double>(n), np + 10.0 * std::sqrt(np * q + 1.0));
  while (true) {
    double u = rng.uniform01();
    double px = q_n;
    int64_t x = 0;
    bool restart = false;
    while (u > px) {
      ++x;
      if (static_cast<double>(x) > bound) {
        restart = true;
        break;
      }
      u -= px;
      px *= static_cast<double>(n - x + 1) * p / (static_cast<double>(x) * q);
    }
    if (!restart) return x;
  }
}

// BTRS: transformed rejection with squeeze (Hörmann 1993); p <= 0.5 and n * p >= 10;
// log_p_over_q = log(p / (1 - p)), or NaN to compute it on the rejection test's first use.
int64_t binomial_btrs(RngStream& rng, int64_t n, double p, double log_p_over_q) {
  const double nd = static_cast<double>(n);
  const double q = 1.0 - p;
  const double spq = std::sqrt(nd * p * q);
  const double b = 1.15 + 2.53 * spq;
  const double a = -0.0873 + 0.0248 * b + 0.01 * p;
  const double c = nd * p + 0.5;
  const double v_r = 0.92 - 4.2 / b;
  // The rejection test's constants (two lgammas and a log) are computed on its first use: most
  // draws are accepted by the squeeze before it, and the values do not depend on the draw.
  bool have_rejection_constants = false;
  double alpha = 0, lpq = 0, m = 0, h = 0;
  while (true) {
    const double u = rng.uniform01() - 0.5;
    const double v = rng.uniform01_open();
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2.0 * a / us + b) * u + c);
    if (k < 0.0 || k > nd) continue;
    if (us >= 0.07 && v <= v_r) return static_cast<int64_t>(k);
    if (!have_rejection_constants) {
      alpha = (2.83 + 5.1 / b) * spq;
      lpq = std::isnan(log_p_over_q) ? std::log(p / q) : log_p_over_q;
      m = std::floor((nd + 1.0) * p);
      h = log_factorial(m) + log_factorial(nd - m);
      have_rejection_constants = true;
    }
    const double log_v = std::log(v * alpha / (a / (us * us) + b));
    if (log_v <= h - log_factorial(k) - log_factorial(nd - k) + (k - m) * lpq) {
      return static_cast<int64_t>(k);
    }
  }
}

std::vector<double> zipf_weights(int64_t n, double s) {
  MOESIM_CHECK(n > 0, "Zipf needs n > 0");
  MOESIM_CHECK(s >= 0.0, "Zipf needs s >= 0");
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) w[k] = std::pow(static_cast<double>(k + 1), -s);
  return w;
}

}  // namespace

double uniform(RngStream& rng, double lo, double hi) {
  MOESIM_CHECK(lo <= hi, "uniform needs lo <= hi");
  return lo + (hi - lo) * rng.uniform01();
}

double exponential(RngStream& rng, double rate) {
  MOESIM_CHECK(rate > 0.0, "exponential needs rate > 0");
  return -std::log(rng.uniform01_open()) / rate;
}

double normal(RngStream& rng, double mean, double stddev) {
  return mean + stddev * standard_normal(rng);
}

double lognormal(RngStream& rng, double mu, double sigma) {
  return std::exp(normal(rng, mu, sigma));
}

double gamma(RngStream& rng, double shape, double scale) {
  MOESIM_CHECK(shape > 0.0 && scale > 0.0, "gamma needs shape > 0 and scale > 0");
  if (shape >= 1.0) return scale * gamma_shape_ge1(rng, shape);
  const double g = gamma_shape_ge1(rng, shape + 1.0);
  return scale * g * std::pow(rng.uniform01_open(), 1.0 / shape);
}

int64_t poisson(RngStream& rng, double mean) {
  MOESIM_CHECK(mean >= 0.0 && std::isfinite(mean), "poisson needs a finite mean >= 0");
  if (mean == 0.0) return 0;
  if (mean < kInversionThreshold) return poisson_inversion(rng, mean);
  return poisson_ptrs(rng, mean);
}

int64_t binomial(RngStream& rng, int64_t n, double p) {
  MOESIM_CHECK(n >= 0, "binomial needs n >= 0");
  MOESIM_CHECK(p >= 0.0 && p <= 1.0, "binomial needs 0 <= p <= 1");
  if (n == 0 || p == 0.0) return 0;
  if (p == 1.0) return n;
  if (p > 0.5) return n - binomial(rng, n, 1.0 - p);
  if (static_cast<double>(n) * p < kInversionThreshold) {
    return binomial_inversion(rng, n, p, std::log1p(-p));
  }
  return binomial_btrs(rng, n, p, std::numeric_limits<double>::quiet_NaN());
}

std::vector<double> dirichlet(RngStream& rng, std::span<const double> alphas) {
  MOESIM_CHECK(!alphas.empty(), "dirichlet needs at least one concentration");
  std::vector<double> out(alphas.size());
  double max_log = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < alphas.size(); ++i) {
    MOESIM_CHECK(alphas[i] > 0.0, "dirichlet concentrations must be > 0");
    out[i] = log_gamma_variate(rng, alphas[i]);
    max_log = std::max(max_log, out[i]);
  }
  double sum = 0.0;
  for (double& x : out) {
    x = std::exp(x - max_log);
    sum += x;
  }
  for (double& x : out) x /= sum;
  return out;
}

void multinomial(RngStream& rng, int64_t n, std::span<const double> probs,
                 std::span<int64_t> counts_out) {
  MOESIM_CHECK(n >= 0, "multinomial needs n >= 0");
  MOESIM_CHECK(probs.size() == counts_out.size(), "multinomial: probs and counts differ in size");
  // Scratch kept per thread: a draw per MoE layer and step would otherwise allocate each time.
  thread_local std::vector<double> suffix;
  fill_suffix_sums(probs, suffix);
  int64_t remaining = n;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (remaining == 0 || probs[i] == 0.0) {
      counts_out[i] = 0;
      continue;
    }
    counts_out[i] = binomial(rng, remaining, conditional_probability(probs, suffix, i));
    remaining -= counts_out[i];
  }
}

PreparedMultinomial::PreparedMultinomial(std::span<const double> probs)
    : PreparedMultinomial(probs, probs.size()) {}

PreparedMultinomial::PreparedMultinomial(std::span<const double> probs, size_t num_prepared) {
  // The conditional probabilities multinomial() computes, and the logarithms binomial() takes of
  // them, once.
  MOESIM_CHECK(num_prepared <= probs.size(), "more categories prepared than there are");
  std::vector<double> suffix;
  fill_suffix_sums(probs, suffix);
  categories_.resize(num_prepared);
  for (size_t i = 0; i < num_prepared; ++i) {
    Category& c = categories_[i];
    if (probs[i] == 0.0) continue;  // kNone
    const double p = conditional_probability(probs, suffix, i);
    if (p == 0.0) continue;
    if (p == 1.0) {
      c.kind = Kind::kAll;
      continue;
    }
    c.kind = p > 0.5 ? Kind::kComplement : Kind::kDirect;
    c.p = p > 0.5 ? 1.0 - p : p;
    c.log1p_neg_p = std::log1p(-c.p);
    c.log_p_over_q = std::log(c.p / (1.0 - c.p));
  }
}

void PreparedMultinomial::draw(RngStream& rng, int64_t n, std::span<int64_t> counts_out) const {
  MOESIM_CHECK(counts_out.size() == categories_.size(),
               "multinomial: probs and counts differ in size");
  draw_prefix(rng, n, categories_.size(), counts_out);
}

int64_t PreparedMultinomial::draw_prefix(RngStream& rng, int64_t n, size_t num_drawn,
                                         std::span<int64_t> counts_out) const {
  MOESIM_CHECK(n >= 0, "multinomial needs n >= 0");
  MOESIM_CHECK(num_drawn <= categories_.size() && counts_out.size() >= num_drawn,
               "multinomial: more categories drawn than there are");
  int64_t remaining = n;
  for (size_t i = 0; i < num_drawn; ++i) {
    const Category& c = categories_[i];
    int64_t x = 0;
    if (remaining > 0 && c.kind != Kind::kNone) {
      if (c.kind == Kind::kAll) {
        x = remaining;
      } else {
        // binomial(rng, remaining, p) with p or 1 - p prepared.
        const int64_t y = static_cast<double>(remaining) * c.p < kInversionThreshold
                              ? binomial_inversion(rng, remaining, c.p, c.log1p_neg_p)
                              : binomial_btrs(rng, remaining, c.p, c.log_p_over_q);
        x = c.kind == Kind::kComplement ? remaining - y : y;
      }
    }
    counts_out[i] = x;
    remaining -= x;
  }
  return remaining;
}

namespace {

std::vector<size_t> decreasing_order(std::span<const double> probs) {
  std::vector<size_t> order(probs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return probs[a] > probs[b]; });
  return order;
}

std::vector<double> ordered(std::span<const double> probs, const std::vector<size_t>& order) {
  std::vector<double> out(order.size());
  for (size_t j = 0; j < order.size(); ++j) out[j] = probs[order[j]];
  return out;
}

}  // namespace

CandidateMultinomial::CandidateMultinomial(std::span<const double> probs)
    : order_(decreasing_order(probs)), p_(ordered(probs, order_)) {
  const std::vector<double>& p = p_;
  fill_suffix_sums(p, suffix_);  // checks the probabilities
  // The usual few candidates' binomials only; draw() prepares the others when it needs them.
  ordered_ = PreparedMultinomial(p, std::min(kPreparedFirst, p.size()));
  const size_t m = p.size();
  min_rate_.assign(m + 1, std::numeric_limits<double>::infinity());
  const double p0 = p[0] / suffix_[0];
  for (size_t j = m; j-- > 1;) {
    const double pj = p[j] / suffix_[0];
    const double d = p0 - pj;
    const double rate = d * d / (2.0 * (p0 + pj - d * d + (1.0 + d) * d / 3.0));
    min_rate_[j] = std::min(min_rate_[j + 1], rate);
  }
  min_rate_[0] = 0.0;  // the likeliest category is always drawn
  // draw()'s cumulative shares for the usual few candidates, computed as draw() would.
  const size_t kept = std::min(kKeptShares, m);
  shares_.assign(kept * m, 0.0);
  for (size_t k = 1; k <= kept; ++k) {
    const double rest = suffix_[k];
    for (size_t j = k; j + 1 < m && rest > 0; ++j) {
      shares_[(k - 1) * m + j] = (rest - suffix_[j + 1]) / rest;
    }
  }
}

size_t CandidateMultinomial::num_candidates(int64_t n, double epsilon) const {
  MOESIM_CHECK(n >= 0 && epsilon > 0 && epsilon < 1, "candidates need n >= 0, 0 < epsilon < 1");
  if (epsilon != needed_epsilon_) {
    needed_ = std::log(static_cast<double>(order_.size()) / epsilon);
    needed_epsilon_ = epsilon;
  }
  const double needed = needed_;
  const double trials = static_cast<double>(n);
  // min_rate_ does not decrease: the first position from which every rate is high enough (a
  // partition point). Searched from the front: the answer is usually among the first few, whose
  // entries share a cache line, where a bisection would touch one line per step.
  size_t j = 0;
  while (j < min_rate_.size() && trials * min_rate_[j] < needed) ++j;
  return j;
}

void CandidateMultinomial::draw(RngStream& rng, int64_t n, size_t num_candidates,
                                std::span<int64_t> counts_out) {
  const size_t m = order_.size();
  MOESIM_CHECK(num_candidates >= 1 && num_candidates <= m && counts_out.size() == m,
               "candidate multinomial: 1..m candidates and one count per category");
  if (num_candidates > ordered_.size()) ordered_ = PreparedMultinomial(p_);
  thread_local std::vector<int64_t> drawn;
  drawn.resize(num_candidates);
  const int64_t left = ordered_.draw_prefix(rng, n, num_candidates, drawn);
  for (size_t j = 0; j < num_candidates; ++j) counts_out[order_[j]] = drawn[j];
  // The others: cumulative rounding of left x their share of the rest (non-decreasing, ending at
  // left).
  const double rest = suffix_[num_candidates];
  const double* kept = num_candidates <= kKeptShares ? &shares_[(num_candidates - 1) * m] : nullptr;
  const auto left_d = static_cast<double>(left);
  int64_t before = 0;
  for (size_t j = num_candidates; j < m; ++j) {
    int64_t upto = left;
    if (j + 1 < m && rest > 0) {
      const double share = kept ? kept[j] : (rest - suffix_[j + 1]) / rest;
      upto = std::min(left, static_cast<int64_t>(left_d * share));
    }
    counts_out[order_[j]] = upto - before;
    before = upto;
  }
}

CategoricalDistribution::CategoricalDistribution(std::span<const double> weights)
    : prob_(weights.size()), alias_(weights.size()), normalized_(weights.size()) {
  const size_t n = weights.size();
  MOESIM_CHECK(n > 0, "categorical needs at least one weight");
  double sum = 0.0;
  for (double w : weights) {
    MOESIM_CHECK(w >= 0.0 && std::isfinite(w), "categorical weights must be finite and >= 0");
    sum += w;
  }
  MOESIM_CHECK(sum > 0.0, "categorical weights must have a positive sum");
  std::vector<double> scaled(n);
  std::vector<int64_t> small;
  std::vector<int64_t> large;
  for (size_t i = 0; i < n; ++i) {
    normalized_[i] = weights[i] / sum;
    scaled[i] = normalized_[i] * static_cast<double>(n);
    (scaled[i] < 1.0 ? small : large).push_back(static_cast<int64_t>(i));
  }
  while (!small.empty() && !large.empty()) {
    const int64_t s = small.back();
    small.pop_back();
    const int64_t l = large.back();
    large.pop_back();
    prob_[s] = scaled[s];
    alias_[s] = l;
    scaled[l] = (scaled[l] + scaled[s]) - 1.0;
    (scaled[l] < 1.0 ? small : large).push_back(l);
  }
  // Leftovers are 1 up to rounding.
  for (int64_t i : large) {
    prob_[i] = 1.0;
    alias_[i] = i;
  }
  for (int64_t i : small) {
    prob_[i] = 1.0;
    alias_[i] = i;
  }
}

int64_t CategoricalDistribution::sample(RngStream& rng) const {
  const int64_t i = static_cast<int64_t>(rng.uniform_int(prob_.size()));
  return rng.uniform01() < prob_[i] ? i : alias_[i];
}

ZipfDistribution::ZipfDistribution(int64_t n, double s)
    : n_(n), s_(s), table_(zipf_weights(n, s)) {}

int64_t ZipfDistribution::sample(RngStream& rng) const { return table_.sample(rng); }

double ZipfDistribution::probability(int64_t k) const {
  MOESIM_CHECK(k >= 0 && k < n_, "Zipf rank out of range");
  return table_.probability(static_cast<size_t>(k));
}

}  // namespace moesim::sim

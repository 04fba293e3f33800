#include "sim/routing/synthetic_routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <utility>

namespace moesim::sim {
namespace {

const RoutingShape kShape{8, 64, 4, 4, 2};

RoutingSpec zipf_spec(double s, SamplingMode mode) {
  RoutingSpec spec;
  spec.defaults.popularity = PopularityKind::kZipf;
  spec.defaults.zipf_s = s;
  spec.sampling = mode;
  return spec;
}

// Two expert-to-GPU maps of kShape's experts over 8 GPUs: e mod 8 and 3e mod 8.
std::pair<std::vector<int32_t>, std::vector<int32_t>> two_placements() {
  std::vector<int32_t> a(kShape.num_experts), b(kShape.num_experts);
  for (int32_t e = 0; e < kShape.num_experts; ++e) {
    a[e] = e % 8;
    b[e] = (e * 3) % 8;
  }
  return {a, b};
}

// Each source's tokens over two domains (a third, then the rest), source-major.
std::vector<int32_t> two_domain_split(const std::vector<int32_t>& tokens) {
  std::vector<int32_t> domains;
  for (int32_t n : tokens) {
    domains.push_back(n / 3);
    domains.push_back(n - n / 3);
  }
  return domains;
}

void expect_top_k_rows(const CountMatrix& m, std::span<const int32_t> tokens, int32_t top_k) {
  for (int32_t s = 0; s < m.num_rows(); ++s) {
    EXPECT_EQ(m.row_sum(s), static_cast<int64_t>(tokens[s]) * top_k) << "source " << s;
    for (int32_t v : m.row(s)) {
      EXPECT_GE(v, 0);
      EXPECT_LE(v, tokens[s]);
    }
  }
}

class EveryMode : public ::testing::TestWithParam<SamplingMode> {};

TEST_P(EveryMode, RowsHoldTopKSelectionsPerTokenAndNoCellExceedsTokens) {
  SyntheticRoutingModel model(kShape, zipf_spec(1.5, GetParam()), 7);
  const std::vector<int32_t> tokens = {0, 1, 3, 50, 200, 7};
  CountMatrix out;
  CountMatrix to_gpus;
  const std::vector<int32_t> gpu_of_expert = [] {
    std::vector<int32_t> m(64);
    for (int e = 0; e < 64; ++e) m[e] = e / 8;
    return m;
  }();
  for (int64_t step = 0; step < 5; ++step) {
    for (int32_t l = 0; l < kShape.num_moe_layers; ++l) {
      model.route({step, l, tokens, {}}, out);
      expect_top_k_rows(out, tokens, kShape.top_k);
      model.route_to_gpus({step, l, tokens, {}}, gpu_of_expert, 8, to_gpus);
      for (int32_t s = 0; s < 6; ++s) EXPECT_EQ(to_gpus.row_sum(s), tokens[s] * 4);
    }
  }
}

TEST_P(EveryMode, ResultDependsOnStepAndLayerNotOnCallOrder) {
  SyntheticRoutingModel a(kShape, zipf_spec(1.0, GetParam()), 3);
  SyntheticRoutingModel b(kShape, zipf_spec(1.0, GetParam()), 3);
  const std::vector<int32_t> tokens(4, 40);
  CountMatrix x, y, z;
  a.route({5, 2, tokens, {}}, x);
  b.route({9, 6, tokens, {}}, z);  // other calls first
  b.route({5, 2, tokens, {}}, y);
  EXPECT_EQ(x, y);
  a.route({6, 2, tokens, {}}, z);
  EXPECT_NE(x, z);
}

INSTANTIATE_TEST_SUITE_P(Modes, EveryMode,
                         ::testing::Values(SamplingMode::kMargins, SamplingMode::kCounts,
                                           SamplingMode::kPerToken, SamplingMode::kAuto),
                         [](const auto& info) {
                           return std::string(sampling_mode_name(info.param));
                         });

// Mean selections per expert over many steps agree between the per-token reference and both
// approximations, within the measured shares error plus sampling noise.
TEST(SyntheticRouting, ApproximationsMatchPerTokenMeans) {
  const std::vector<int32_t> tokens(8, 64);
  std::vector<std::vector<double>> means;
  for (SamplingMode mode :
       {SamplingMode::kPerToken, SamplingMode::kCounts, SamplingMode::kMargins}) {
    SyntheticRoutingModel model(kShape, zipf_spec(1.0, mode), 11);
    std::vector<double> mean(64, 0.0);
    CountMatrix out;
    for (int64_t step = 0; step < 400; ++step) {
      model.route({step, 0, tokens, {}}, out);
      std::vector<int64_t> cols(64);
      out.col_sums(cols);
      for (int e = 0; e < 64; ++e) mean[e] += cols[e] / 400.0 / (8 * 64);
    }
    means.push_back(mean);
  }
  for (int e = 0; e < 64; ++e) {
    // Per-token inclusion rate vs approximations: |diff| <= 0.02 (shares error ~0.01 + noise).
    EXPECT_NEAR(means[1][e], means[0][e], 0.02) << e;
    EXPECT_NEAR(means[2][e], means[0][e], 0.02) << e;
  }
}

TEST(SyntheticRouting, FastPathMatchesPerExpertPathInDistribution) {
  const std::vector<int32_t> tokens(16, 128);
  std::vector<int32_t> gpu_of_expert(64);
  for (int e = 0; e < 64; ++e) gpu_of_expert[e] = e % 16;
  SyntheticRoutingModel model(kShape, zipf_spec(1.2, SamplingMode::kMargins), 5);
  std::vector<double> fast(16, 0.0), slow(16, 0.0);
  CountMatrix se, sd, agg;
  for (int64_t step = 0; step < 300; ++step) {
    model.route_to_gpus({step, 3, tokens, {}}, gpu_of_expert, 16, sd);
    model.route({step, 3, tokens, {}}, se);
    aggregate_to_gpus(se, gpu_of_expert, 16, agg);
    for (int g = 0; g < 16; ++g) {
      for (int s = 0; s < 16; ++s) {
        fast[g] += sd.at(s, g);
        slow[g] += agg.at(s, g);
      }
    }
  }
  for (int g = 0; g < 16; ++g) EXPECT_NEAR(fast[g] / slow[g], 1.0, 0.03) << g;
}

TEST(SyntheticRouting, DriftKeepsTheHotSetWithinAnEpochAndMovesItAfter) {
  RoutingSpec spec = zipf_spec(1.5, SamplingMode::kMargins);
  spec.defaults.drift = {.enabled = true, .mean_epoch_steps = 50, .epoch_cv = 0.5};
  SyntheticRoutingModel model(kShape, spec, 9);
  std::vector<int64_t> lengths;
  int64_t changes_of_hottest = 0;
  int64_t prev_epoch = 0;
  auto hottest = [&](int64_t step) {
    auto w = model.popularity(1, step, 0);
    return std::max_element(w.begin(), w.end()) - w.begin();
  };
  int64_t prev_hot = hottest(0);
  for (int64_t step = 1; step < 5000; ++step) {
    const int64_t epoch = model.epoch_of(1, step);
    const int64_t hot = hottest(step);
    if (epoch == prev_epoch) {
      ASSERT_EQ(hot, prev_hot) << step;
    } else {
      ASSERT_EQ(epoch, prev_epoch + 1);
      changes_of_hottest += hot != prev_hot ? 1 : 0;
      lengths.push_back(step - model.epoch_start_step(1, prev_epoch));
    }
    prev_epoch = epoch;
    prev_hot = hot;
  }
  ASSERT_GT(lengths.size(), 50u);
  const double mean = std::accumulate(lengths.begin(), lengths.end(), 0.0) / lengths.size();
  EXPECT_NEAR(mean, 50.0, 8.0);  // gamma, cv 0.5: sd of the mean of ~100 epochs ~2.5
  EXPECT_GT(changes_of_hottest, static_cast<int64_t>(lengths.size()) * 8 / 10);
}

TEST(SyntheticRouting, DomainsPreferDifferentHotSetsAndSplitsAreHonoured) {
  RoutingSpec spec = zipf_spec(1.5, SamplingMode::kCounts);
  spec.domains = {{"code", 1.0}, {"math", 1.0}};
  SyntheticRoutingModel model(kShape, spec, 4);
  auto top = [&](int d) {
    auto w = model.popularity(0, 0, d);
    return std::max_element(w.begin(), w.end()) - w.begin();
  };
  EXPECT_NE(top(0), top(1));
  // Source 0 is all code, source 1 all math: each source's hottest expert is its domain's.
  const std::vector<int32_t> tokens = {400, 400};
  const std::vector<int32_t> split = {400, 0, 0, 400};
  CountMatrix out;
  model.route({0, 0, tokens, split}, out);
  expect_top_k_rows(out, tokens, kShape.top_k);
  for (int s = 0; s < 2; ++s) {
    auto row = out.row(s);
    EXPECT_EQ(std::max_element(row.begin(), row.end()) - row.begin(), top(s));
  }
}

TEST(SyntheticRouting, TokenSetsRespectGroupLimitAndCoactivationClustersExist) {
  RoutingSpec spec = zipf_spec(1.0, SamplingMode::kMargins);
  spec.defaults.coactivation = {.cluster_size = 4, .prob = 0.5};
  SyntheticRoutingModel model(kShape, spec, 8);
  const auto clusters = model.clusters(0);
  ASSERT_EQ(clusters.size(), 64u);
  for (int e = 0; e < 64; ++e) EXPECT_EQ(clusters[e] / 4, kShape.group_of(e));  // within group
  std::vector<int32_t> sets;
  model.sample_token_experts(0, 0, 0, 1000, sets);
  ASSERT_EQ(sets.size(), 4000u);
  for (int t = 0; t < 1000; ++t) {
    std::set<int32_t> groups;
    for (int j = 0; j < 4; ++j) groups.insert(kShape.group_of(sets[t * 4 + j]));
    EXPECT_LE(groups.size(), 2u);
  }
}

TEST(SyntheticRouting, StageProfileSharpensDeepLayers) {
  RoutingSpec spec = zipf_spec(1.0, SamplingMode::kMargins);
  spec.stages.enabled = true;
  spec.stages.skew_scale = {0.0, 1.0, 2.0};
  SyntheticRoutingModel model(kShape, spec, 2);
  auto max_share = [&](int32_t layer) {
    auto w = model.popularity(layer, 0, 0);
    return *std::max_element(w.begin(), w.end());
  };
  EXPECT_DOUBLE_EQ(max_share(0), 1.0 / 64);  // shallow: uniform
  EXPECT_GT(max_share(7), max_share(4));     // deep sharper than middle
}

}  // namespace
}  // namespace moesim::sim

namespace moesim::sim {
namespace {

// The fast fidelity's per-destination totals (route_totals_to_gpus) are the totals route_to_gpus()
// draws under margins sampling before splitting them over sources (the same draws from the same
// stream, also with a domain split): its column sums differ from them only by the systematic
// rounding, less than one selection per source and destination, and have the same sum.
TEST(SyntheticRouting, DestinationTotalsAreTheColumnSumsUpToRoundingUnderMargins) {
  for (const bool split : {false, true}) {
    RoutingSpec spec = zipf_spec(1.3, SamplingMode::kMargins);
    if (split) spec.domains = {{"code", 1.0}, {"math", 2.0}};
    SyntheticRoutingModel model(kShape, spec, 21);
    std::vector<int32_t> gpu_of_expert(kShape.num_experts);
    for (int32_t e = 0; e < kShape.num_experts; ++e) gpu_of_expert[e] = (e * 5) % 16;
    const std::vector<int32_t> tokens = {30, 0, 7, 120, 64, 1, 0, 33, 9, 10, 11, 12, 3, 4, 5, 6};
    std::vector<int32_t> domains;
    for (int32_t n : tokens) {
      domains.push_back(n / 3);
      domains.push_back(n - n / 3);
    }
    for (int64_t step : {0, 5, 17}) {
      RoutingQuery q{step, 2, tokens,
                     split ? std::span<const int32_t>(domains) : std::span<const int32_t>()};
      CountMatrix m;
      model.route_to_gpus(q, gpu_of_expert, 16, m);
      std::vector<int64_t> want(16);
      m.col_sums(want);
      std::vector<int64_t> got;
      ASSERT_TRUE(model.route_totals_to_gpus(q, gpu_of_expert, 16, got));
      int64_t sum_got = 0, sum_want = 0, largest = 0;
      for (int32_t g = 0; g < 16; ++g) {
        sum_got += got[g];
        sum_want += want[g];
        largest = std::max<int64_t>(largest, std::abs(got[g] - want[g]));
      }
      EXPECT_EQ(sum_got, sum_want);
      // 14 sources with tokens, two rows when split.
      EXPECT_LE(largest, split ? 28 : 14) << "step " << step << (split ? " (split)" : "");
      EXPECT_GT(largest, -1);
    }
  }
}

// The fast fidelity's candidate draw (RoutingQuery::candidate_epsilon): with few selections per
// destination nothing can be bounded away and the totals are the full draw's, bit for bit; with
// many, they keep the layer's sum, the hottest destinations are drawn (their mean is the full
// draw's) and the others are the same function of what the candidates left.
TEST(SyntheticRouting, DestinationTotalsWithCandidatesKeepTheSumAndTheHottestDestinations) {
  const RoutingSpec spec = zipf_spec(1.3, SamplingMode::kMargins);
  std::vector<int32_t> gpu_of_expert(kShape.num_experts);
  for (int32_t e = 0; e < kShape.num_experts; ++e) gpu_of_expert[e] = (e * 5) % 16;
  SyntheticRoutingModel full(kShape, spec, 21), cand(kShape, spec, 21);
  const std::vector<int32_t> few = {3, 0, 2, 1, 0, 4, 1, 0, 2, 1, 1, 0, 3, 0, 1, 2};
  for (int64_t step = 0; step < 20; ++step) {
    RoutingQuery q{step, 1, few, {}};
    std::vector<int64_t> want, got;
    ASSERT_TRUE(full.route_totals_to_gpus(q, gpu_of_expert, 16, want));
    q.candidate_epsilon = 1e-6;
    ASSERT_TRUE(cand.route_totals_to_gpus(q, gpu_of_expert, 16, got));
    EXPECT_EQ(got, want) << "step " << step;
  }
  const std::vector<int32_t> many(16, 20'000);
  std::vector<double> mean_full(16, 0.0), mean_cand(16, 0.0);
  int64_t differ = 0;
  const int kSteps = 400;
  for (int64_t step = 0; step < kSteps; ++step) {
    RoutingQuery q{step, 1, many, {}};
    std::vector<int64_t> want, got;
    ASSERT_TRUE(full.route_totals_to_gpus(q, gpu_of_expert, 16, want));
    q.candidate_epsilon = 1e-6;
    ASSERT_TRUE(cand.route_totals_to_gpus(q, gpu_of_expert, 16, got));
    int64_t sum = 0;
    for (int32_t g = 0; g < 16; ++g) {
      sum += got[g];
      mean_full[g] += static_cast<double>(want[g]) / kSteps;
      mean_cand[g] += static_cast<double>(got[g]) / kSteps;
    }
    EXPECT_EQ(sum, int64_t{16} * 20'000 * kShape.top_k);
    differ += got != want;
    // The hottest destination of the full draw is the candidate draw's too (same expected
    // order; Bernstein's bound at 1e-6 per layer).
    const auto hottest = [](const std::vector<int64_t>& v) {
      return *std::max_element(v.begin(), v.end());
    };
    EXPECT_NEAR(static_cast<double>(hottest(got)), static_cast<double>(hottest(want)),
                0.05 * static_cast<double>(hottest(want)));
  }
  EXPECT_GT(differ, kSteps / 2);  // the candidate draw did engage
  for (int32_t g = 0; g < 16; ++g) {
    // Means over 400 layers: within 1% of each other (a destination's count is ~40,000).
    EXPECT_NEAR(mean_cand[g], mean_full[g], 0.01 * mean_full[g] + 5) << "gpu " << g;
  }
}

// The GPU shares behind the totals are kept per layer between calls: a call's totals depend on
// (step, layer, tokens, placement, domain split) only, not on what the model was asked before,
// also when the placement or the split changes between calls of the same layer.
TEST(SyntheticRouting, DestinationTotalsDoNotDependOnThePlacementsOfEarlierCalls) {
  RoutingSpec spec = zipf_spec(1.3, SamplingMode::kMargins);
  spec.domains = {{"code", 1.0}, {"math", 2.0}};
  const auto [a, b] = two_placements();
  const std::vector<int32_t> tokens = {30, 7, 120, 64, 0, 9, 10, 11};
  const std::vector<int32_t> domains = two_domain_split(tokens);
  SyntheticRoutingModel history(kShape, spec, 5);
  struct Call {
    const std::vector<int32_t>* placement;
    bool split;
    int64_t step;
  };
  for (const Call& c : {Call{&a, false, 0}, Call{&a, false, 1}, Call{&b, false, 1},
                        Call{&b, true, 2}, Call{&a, true, 2}, Call{&a, false, 3}}) {
    const RoutingQuery q{c.step, 1, tokens,
                         c.split ? std::span<const int32_t>(domains) : std::span<const int32_t>()};
    std::vector<int64_t> got, want;
    ASSERT_TRUE(history.route_totals_to_gpus(q, *c.placement, 8, got));
    SyntheticRoutingModel fresh(kShape, spec, 5);
    ASSERT_TRUE(fresh.route_totals_to_gpus(q, *c.placement, 8, want));
    EXPECT_EQ(got, want) << "step " << c.step << (c.split ? " (split)" : "");
  }
}

// Models sharing one SyntheticPopularity draw exactly what a fresh model with a popularity of its
// own (same popularity seed, same draw seed) draws for the same call: sharing is a cache. Drift,
// domains and co-activation on; two models on different placements in the same epochs, one of
// them behind (the shared epochs and destination shares are kept, dropped and drawn again);
// every call kind, placements that change, the candidate draw. Models on one popularity see the
// same hot experts; their own draw seeds give them their own routing.
TEST(SyntheticRouting, ModelsSharingAPopularityDrawAsFreshModels) {
  RoutingSpec spec = zipf_spec(1.2, SamplingMode::kAuto);
  spec.per_token_max_tokens = 4;
  spec.domains = {{"code", 1.0}, {"math", 2.0}};
  spec.defaults.coactivation = {.cluster_size = 4, .prob = 0.4};
  spec.defaults.drift = {.enabled = true, .mean_epoch_steps = 3.0, .epoch_cv = 0.5};
  auto shared = std::make_shared<SyntheticPopularity>(kShape, spec, 11);
  SyntheticRoutingModel ahead(shared, 21), behind(shared, 22);
  const auto [a, b] = two_placements();
  const std::vector<int32_t> tokens = {30, 2, 120, 64, 0, 9, 10, 11};
  const std::vector<int32_t> domains = two_domain_split(tokens);
  auto same = [&](SyntheticRoutingModel& m, uint64_t draw_seed, int64_t step, int32_t layer,
                  const std::vector<int32_t>& placement) {
    SyntheticRoutingModel fresh(std::make_shared<SyntheticPopularity>(kShape, spec, 11), draw_seed);
    const bool split = step % 3 == 0;
    RoutingQuery q{step, layer, tokens,
                   split ? std::span<const int32_t>(domains) : std::span<const int32_t>()};
    CountMatrix x, y;
    m.route(q, x);
    fresh.route(q, y);
    EXPECT_EQ(x, y) << "route, step " << step << " layer " << layer;
    m.route_to_gpus(q, placement, 8, x);
    fresh.route_to_gpus(q, placement, 8, y);
    EXPECT_EQ(x, y) << "route_to_gpus, step " << step << " layer " << layer;
    std::vector<int64_t> got, want;
    ASSERT_TRUE(m.route_totals_to_gpus(q, placement, 8, got));
    ASSERT_TRUE(fresh.route_totals_to_gpus(q, placement, 8, want));
    EXPECT_EQ(got, want) << "totals, step " << step << " layer " << layer;
    q.tokens_per_src_domain = {};
    q.candidate_epsilon = 1e-3;
    ASSERT_TRUE(m.route_totals_to_gpus(q, placement, 8, got));
    ASSERT_TRUE(fresh.route_totals_to_gpus(q, placement, 8, want));
    EXPECT_EQ(got, want) << "candidate totals, step " << step << " layer " << layer;
    std::vector<int32_t> t1, t2;
    m.sample_token_experts(step, layer, 1, 5, t1);
    fresh.sample_token_experts(step, layer, 1, 5, t2);
    EXPECT_EQ(t1, t2) << "token sets, step " << step << " layer " << layer;
    const std::span<const double> s1 = m.expected_shares(layer, step);
    const std::span<const double> s2 = fresh.expected_shares(layer, step);
    EXPECT_TRUE(std::equal(s1.begin(), s1.end(), s2.begin(), s2.end()));
  };
  for (int64_t step = 0; step < 40; ++step) {
    const bool first = (step / 5) % 2 == 0;
    for (int32_t l = 0; l < kShape.num_moe_layers; l += 3) {
      same(ahead, 21, step, l, first ? a : b);
      // Behind: the same step on the other placement, then one far behind (kept epochs dropped).
      same(behind, 22, step, l, first ? b : a);
      if (step % 4 == 0) same(behind, 22, step / 4, l, a);
    }
  }
  // One popularity: the same shares at a step; their own draws.
  const RoutingQuery q{7, 2, tokens, {}};
  EXPECT_EQ(ahead.epoch_of(2, 7), behind.epoch_of(2, 7));
  const std::span<const double> p1 = ahead.popularity(2, 7, 0);
  const std::vector<double> hot(p1.begin(), p1.end());
  const std::span<const double> p2 = behind.popularity(2, 7, 0);
  EXPECT_TRUE(std::equal(hot.begin(), hot.end(), p2.begin(), p2.end()));
  CountMatrix x, y;
  ahead.route(q, x);
  behind.route(q, y);
  EXPECT_NE(x, y);
}

// Under counts sampling the totals have the same distribution: the mean of each destination's
// total over many steps matches.
TEST(SyntheticRouting, DestinationTotalsHaveTheColumnSumsMeanUnderCounts) {
  SyntheticRoutingModel model(kShape, zipf_spec(1.0, SamplingMode::kCounts), 3);
  std::vector<int32_t> gpu_of_expert(kShape.num_experts);
  for (int32_t e = 0; e < kShape.num_experts; ++e) gpu_of_expert[e] = e % 8;
  const std::vector<int32_t> tokens = {50, 50, 20, 80};
  std::vector<double> sum_matrix(8, 0.0), sum_totals(8, 0.0);
  for (int64_t step = 0; step < 400; ++step) {
    RoutingQuery q{step, 0, tokens, {}};
    CountMatrix m;
    model.route_to_gpus(q, gpu_of_expert, 8, m);
    std::vector<int64_t> cols(8), totals;
    m.col_sums(cols);
    ASSERT_TRUE(model.route_totals_to_gpus(q, gpu_of_expert, 8, totals));
    for (int g = 0; g < 8; ++g) {
      sum_matrix[g] += static_cast<double>(cols[g]);
      sum_totals[g] += static_cast<double>(totals[g]);
    }
  }
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(sum_totals[g] / sum_matrix[g], 1.0, 0.02) << g;
}

}  // namespace
}  // namespace moesim::sim

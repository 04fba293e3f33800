#include "sim/policy/expert_pruning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "sim/config/config_error.h"
#include "sim/config/toml_source.h"
#include "sim/core/distributions.h"

namespace moesim::sim {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

RoutingShape small_shape(int32_t layers = 2) {
  RoutingShape s;
  s.num_moe_layers = layers;
  s.num_experts = 16;
  s.top_k = 2;
  return s;
}

RoutingSpec zipf_spec() {
  RoutingSpec spec;
  spec.defaults.popularity = PopularityKind::kZipf;
  spec.defaults.zipf_s = 1.2;
  return spec;
}

// A profile with given selections in layer 0 (one token per selection, top-1).
ActivationProfile profile_with(const std::vector<int32_t>& counts) {
  ActivationProfile p(1, static_cast<int32_t>(counts.size()), {0});
  std::vector<int32_t> sets;
  for (size_t e = 0; e < counts.size(); ++e)
    sets.insert(sets.end(), counts[e], static_cast<int32_t>(e));
  CountMatrix m;
  m.reset(1, static_cast<int32_t>(counts.size()));
  for (size_t e = 0; e < counts.size(); ++e) m.at(0, static_cast<int32_t>(e)) = counts[e];
  p.add_counts(0, m);
  p.add_token_sets(0, sets, 1);
  return p;
}

TEST(ExpertPruningConfig, DefaultsAndErrors) {
  auto parse = [](const std::string& text) {
    TomlDocument doc = TomlDocument::parse_string(text, "p.toml");
    TomlTable t = doc.root();
    return parse_expert_pruning_config(t);
  };
  const ExpertPruningConfig d = parse("");
  EXPECT_DOUBLE_EQ(d.fraction, 0.2);
  EXPECT_DOUBLE_EQ(d.dead_threshold, 1e-3);
  EXPECT_EQ(d.profile_steps, 8);
  EXPECT_EQ(d.tokens_per_step, 4096);
  EXPECT_DOUBLE_EQ(parse("fraction = 0.5\n").fraction, 0.5);
  EXPECT_NE(error_of([&] { parse("fraction = 1.0\n"); }).find("[0, 1)"), std::string::npos);
  EXPECT_NE(error_of([&] { parse("profile_steps = 0\n"); }).find("profile_steps"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse("fractions = 0.5\n"); }).find("unknown key"), std::string::npos);
}

TEST(ExpertPruning, ProfileCountsEveryTokenSet) {
  SyntheticRoutingModel routing(small_shape(), zipf_spec(), 3);
  const ActivationProfile p = profile_activations(routing, 0, 4, 1000, {1});
  for (int32_t l = 0; l < 2; ++l) {
    EXPECT_EQ(p.num_sampled_tokens(l), 4000);
    int64_t total = 0;
    double rate_sum = 0;
    for (int32_t e = 0; e < 16; ++e) {
      total += p.selections(l, e);
      rate_sum += activation_rate(p, l, e);
    }
    EXPECT_EQ(total, 8000);
    EXPECT_NEAR(rate_sum, 2.0, 1e-12);
  }
  // The profile agrees with the sampled token sets' co-activation diagonal.
  for (int32_t e = 0; e < 16; ++e) EXPECT_EQ(p.coactivation(1, e, e), p.selections(1, e));
  // Deterministic.
  SyntheticRoutingModel again(small_shape(), zipf_spec(), 3);
  const ActivationProfile q = profile_activations(again, 0, 4, 1000, {});
  for (int32_t e = 0; e < 16; ++e) EXPECT_EQ(p.selections(0, e), q.selections(0, e));
}

TEST(ExpertPruning, AffinityByHand) {
  ActivationProfile p(1, 3, {0});
  const std::vector<int32_t> sets = {0, 1, 0, 1, 0, 2};  // {0,1}, {0,1}, {0,2}
  p.add_token_sets(0, sets, 2);
  const std::vector<double> c = coactivation_affinity(p, 0);
  EXPECT_DOUBLE_EQ(c[0 * 3 + 0], 1.0);
  EXPECT_DOUBLE_EQ(c[0 * 3 + 1], 2.0 / std::sqrt(6.0));
  EXPECT_DOUBLE_EQ(c[1 * 3 + 0], c[0 * 3 + 1]);
  EXPECT_DOUBLE_EQ(c[0 * 3 + 2], 1.0 / std::sqrt(3.0));
  EXPECT_DOUBLE_EQ(c[1 * 3 + 2], 0.0);
}

TEST(ExpertPruning, DeadExpertsAndLeastActivatedPlan) {
  const ActivationProfile p = profile_with({50, 0, 30, 1, 0, 19});  // 100 tokens
  EXPECT_EQ(dead_experts(p, 0, 0.005), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(dead_experts(p, 0, 0.02), (std::vector<int32_t>{1, 3, 4}));
  // 50% of 6: the three least activated; ties (1 and 4 at 0) by expert id.
  const PruningPlan half = PruningPlan::least_activated(p, 0.5, 1);
  EXPECT_EQ(half.num_kept_per_layer(), 3);
  EXPECT_EQ(half.pruned(0), (std::vector<int32_t>{1, 3, 4}));
  EXPECT_EQ(half.kept(0), (std::vector<int32_t>{0, 2, 5}));
  EXPECT_TRUE(half.is_pruned(0, 3));
  EXPECT_FALSE(half.is_pruned(0, 5));
  // round(0.25 * 6) = 2.
  EXPECT_EQ(PruningPlan::least_activated(p, 0.25, 1).pruned(0), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(PruningPlan::least_activated(p, 0.0, 1).num_pruned_per_layer(), 0);
}

// Re-routing follows the Plackett-Luce continuation: top-2 sets drawn from all experts and then
// re-routed have the inclusion rates of top-2 sets drawn directly from the kept experts.
TEST(ExpertPruning, RerouteMatchesDirectDrawAmongKeptExperts) {
  const std::vector<double> w = {0.3, 0.25, 0.2, 0.15, 0.1};
  const ActivationProfile p = profile_with({100, 1, 50, 50, 50});
  const PruningPlan plan = PruningPlan::least_activated(p, 0.2, 2);  // prunes expert 1
  ASSERT_EQ(plan.pruned(0), (std::vector<int32_t>{1}));
  auto draw_sets = [](std::span<const double> weights, int64_t n, RngStream& rng) {
    std::vector<int32_t> sets;
    const CategoricalDistribution dist(weights);
    for (int64_t t = 0; t < n; ++t) {
      const auto a = static_cast<int32_t>(dist.sample(rng));
      int32_t b = a;
      while (b == a) b = static_cast<int32_t>(dist.sample(rng));
      sets.push_back(a);
      sets.push_back(b);
    }
    return sets;
  };
  const int64_t n = 200000;
  RngStream rng_a(1, "a"), rng_b(1, "b"), rng_c(1, "c");
  std::vector<int32_t> rerouted = draw_sets(w, n, rng_a);
  int64_t hit_pruned = 0;
  for (int32_t e : rerouted) hit_pruned += e == 1 ? 1 : 0;
  const RerouteStats stats = reroute_token_sets(plan, 0, w, 2, rerouted, rng_b);
  EXPECT_EQ(stats.num_tokens, n);
  EXPECT_EQ(stats.num_selections, 2 * n);
  EXPECT_EQ(stats.num_pruned_selections, hit_pruned);
  EXPECT_EQ(stats.num_tokens_affected, hit_pruned);  // at most one pruned pick per token
  EXPECT_DOUBLE_EQ(stats.mass_lost(), static_cast<double>(hit_pruned) / (2.0 * n));
  std::vector<double> kept_w = w;
  kept_w[1] = 0.0;
  const std::vector<int32_t> direct = draw_sets(kept_w, n, rng_c);
  std::vector<double> rate_rerouted(5, 0.0), rate_direct(5, 0.0);
  for (size_t i = 0; i < rerouted.size(); i += 2) {
    ASSERT_NE(rerouted[i], rerouted[i + 1]);
    for (int j = 0; j < 2; ++j) {
      rate_rerouted[rerouted[i + j]] += 1.0 / n;
      rate_direct[direct[i + j]] += 1.0 / n;
    }
  }
  EXPECT_EQ(rate_rerouted[1], 0.0);
  for (int e = 0; e < 5; ++e) EXPECT_NEAR(rate_rerouted[e], rate_direct[e], 0.01) << e;
}

TEST(ExpertPruning, PrunedRoutingModelKeepsRowSumsAndCaps) {
  const RoutingShape shape = small_shape();
  SyntheticRoutingModel profiler(shape, zipf_spec(), 5);
  const ActivationProfile p = profile_activations(profiler, 0, 2, 2000, {});
  const PruningPlan plan = PruningPlan::least_activated(p, 0.5, shape.top_k);
  SyntheticRoutingModel inner(shape, zipf_spec(), 5);
  PrunedRoutingModel pruned(inner, plan);
  EXPECT_EQ(pruned.shape().num_experts, 8);
  const std::vector<int32_t> tokens = {0, 1, 3, 40, 500};
  RoutingQuery q;
  q.step_idx = 9;
  q.moe_layer_idx = 1;
  q.tokens_per_src = tokens;
  CountMatrix out;
  pruned.route(q, out);
  ASSERT_EQ(out.num_cols(), 8);
  for (int32_t s = 0; s < 5; ++s) {
    EXPECT_EQ(out.row_sum(s), static_cast<int64_t>(tokens[s]) * 2);
    for (int32_t v : out.row(s)) EXPECT_LE(v, tokens[s]);
  }
  // Unpruned: the inner model's counts unchanged.
  const PruningPlan none = PruningPlan::least_activated(p, 0.0, shape.top_k);
  SyntheticRoutingModel inner2(shape, zipf_spec(), 5);
  PrunedRoutingModel same(inner2, none);
  CountMatrix a, b;
  same.route(q, a);
  SyntheticRoutingModel inner3(shape, zipf_spec(), 5);
  inner3.route(q, b);
  EXPECT_EQ(a, b);
}

TEST(ExpertPruning, PrunedCardAndRepackedPlacement) {
  ModelCard card;
  LayerSpec dense;
  dense.ffn.intermediate_size = 64;
  LayerSpec moe;
  moe.ffn.is_moe = true;
  moe.ffn.moe.num_routed_experts = 16;
  moe.ffn.moe.top_k = 2;
  moe.ffn.moe.num_expert_groups = 4;
  moe.ffn.moe.topk_groups = 2;
  card.layers = {dense, moe, moe};
  const ModelCard p = pruned_model_card(card, 10);
  EXPECT_EQ(p.layers[1].ffn.moe.num_routed_experts, 10);
  EXPECT_EQ(p.layers[2].ffn.moe.num_expert_groups, 1);
  EXPECT_FALSE(p.layers[0].ffn.is_moe);
  const ExpertPlacement placement = repacked_placement(10, 4, 4, 1);
  EXPECT_EQ(placement.num_experts(), 10);
  EXPECT_EQ(placement.max_slots_per_gpu(), 3);  // 10 over 4 GPUs: 3, 2, 3, 2
  EXPECT_EQ(placement.num_slots(0) + placement.num_slots(1) + placement.num_slots(2) +
                placement.num_slots(3),
            10);
  EXPECT_EQ(placement.num_shared_experts(), 1);
}

// The whole study on the tiny model: pruning frees weight memory and loses routing mass
// monotonically; the unpruned row loses none.
TEST(ExpertPruning, StudyOnTinyScenario) {
  const std::filesystem::path dir =
      std::filesystem::path(MOESIM_BINARY_DIR) / "tests" / "expert_pruning_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "tiny_prune.toml";
  {
    std::ofstream f(file);
    f << "name = \"tiny_prune\"\n"
      << "model = \"" << MOESIM_SOURCE_DIR << "/models/tiny.toml\"\n"
      << "topology = \"" << MOESIM_SOURCE_DIR << "/topologies/h200-node.toml\"\n"
      << "[deployment]\nreplicas = 1\ngpus_per_replica = 8\n"
      << "[scheduler]\nworkspace_gib = 1\n"
      << "[workload]\nkind = \"synthetic\"\nduration_s = 1\n"
      << "[workload.arrival]\nrate_per_s = 10\n"
      << "[workload.prompt_tokens]\ndistribution = \"lognormal\"\np50 = 600\np99 = 2500\n"
      << "max = 3000\n"
      << "[workload.output_tokens]\ndistribution = \"lognormal\"\nmean = 60\nsigma = 0.8\n"
      << "max = 400\n"
      << "[routing]\npopularity = \"zipf\"\nzipf_s = 1.2\n"
      << "[run]\nseed = 3\nduration_s = 1\n";
  }
  const Scenario sc = load_scenario(file.string());
  PruningStudyOptions opt;
  opt.fractions = {0.0, 0.25, 0.5};
  opt.batch_per_gpu = 16;
  opt.context_tokens = 512;
  opt.num_timed_steps = 2;
  opt.profile.profile_steps = 2;
  opt.profile.tokens_per_step = 2000;
  const PruningStudy s = run_pruning_study(sc, opt);
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.num_experts, 16);
  EXPECT_EQ(s.rows[0].experts_kept_per_layer, 16);
  EXPECT_EQ(s.rows[1].experts_kept_per_layer, 12);
  EXPECT_EQ(s.rows[2].experts_kept_per_layer, 8);
  EXPECT_EQ(s.rows[0].routing_mass_lost, 0.0);
  EXPECT_EQ(s.rows[0].tokens_rerouted, 0.0);
  for (size_t i = 1; i < s.rows.size(); ++i) {
    EXPECT_LT(s.rows[i].weight_bytes_per_gpu, s.rows[i - 1].weight_bytes_per_gpu);
    EXPECT_GT(s.rows[i].kv_pool_bytes_per_gpu, s.rows[i - 1].kv_pool_bytes_per_gpu);
    EXPECT_GT(s.rows[i].routing_mass_lost, s.rows[i - 1].routing_mass_lost);
    EXPECT_GE(s.rows[i].max_layer_mass_lost, s.rows[i].routing_mass_lost);
    EXPECT_GT(s.rows[i].decode_step_s, 0.0);
  }
  // Zipf 1.2 over 16 experts: the least-activated half carries well under half the mass.
  EXPECT_LT(s.rows[2].routing_mass_lost, 0.35);
  EXPECT_NE(format_pruning_study_text(s).find("mass lost"), std::string::npos);
  EXPECT_NE(format_pruning_study_json(s).find("\"routing_mass_lost\""), std::string::npos);
  // A fraction keeping fewer than top_k experts is an input error.
  opt.fractions = {0.95};
  EXPECT_NE(error_of([&] { run_pruning_study(sc, opt); }).find("fractions"), std::string::npos);
}

TEST(ExpertPruning, PlanJsonRoundTripAndErrors) {
  const RoutingShape shape = small_shape(2);
  const PruningPlan plan = PruningPlan::from_layers(16, {{3, 1}, {0, 15}});
  EXPECT_EQ(plan.pruned(0), (std::vector<int32_t>{1, 3}));
  EXPECT_TRUE(plan.is_pruned(1, 15));
  const std::string text = format_pruning_plan_json(plan, "tiny", 0.125);
  const PruningPlan back = parse_pruning_plan_json(text, "plan.json", shape);
  ASSERT_EQ(back.num_moe_layers(), 2);
  EXPECT_EQ(back.pruned(0), plan.pruned(0));
  EXPECT_EQ(back.pruned(1), plan.pruned(1));
  EXPECT_EQ(back.num_kept_per_layer(), 14);
  auto error = [&](const std::string& t) {
    return error_of([&] { parse_pruning_plan_json(t, "plan.json", shape); });
  };
  EXPECT_NE(error("[1, 2]").find("JSON object"), std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 8, "pruned": [[1], [2]]})").find("num_experts"),
            std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 16, "pruned": [[1]]})").find("pruned"), std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 16, "pruned": [[1], [2, 3]]})").find("pruned[1]"),
            std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 16, "pruned": [[1, 1], [2, 3]]})").find("distinct"),
            std::string::npos);
  EXPECT_NE(error(R"({"num_experts": 16, "pruned": [[16], [2]]})").find("pruned[0]"),
            std::string::npos);
  std::string fifteen = "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14]";
  EXPECT_NE(
      error(R"({"num_experts": 16, "pruned": [)" + fifteen + "," + fifteen + "]}").find("top_k"),
      std::string::npos);
}

}  // namespace
}  // namespace moesim::sim

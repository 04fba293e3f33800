// The EPLB rebalancer's decisions: per-layer moving-average loads, the plan (target, copies,
// drops), alignment to the current placement, and the predicted imbalance it removes.
#include "sim/policy/eplb_rebalance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sim/config/toml_source.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;

// 16 experts in 4 groups, 8 GPUs.
EplbPolicyConfig parse(const std::string& text, int32_t num_nodes = 1) {
  TomlDocument doc = TomlDocument::parse_string(text, "p.toml");
  TomlTable t = doc.root();
  return parse_eplb_policy_config(t, 16, 4, num_nodes, 8);
}

TEST(EplbPolicyConfig, DefaultsAndErrors) {
  const EplbPolicyConfig d = parse("");
  EXPECT_EQ(d.balance.redundant_slots, 8);  // one per GPU
  EXPECT_EQ(d.balance.variant, EplbConfig::Variant::kAuto);
  EXPECT_EQ(d.balance.average, LoadAverageKind::kExponential);
  EXPECT_DOUBLE_EQ(d.balance.ema_alpha, 0.1);
  EXPECT_EQ(d.balance.window_samples, 32);
  EXPECT_DOUBLE_EQ(d.balance.period_s, 60.0);
  EXPECT_DOUBLE_EQ(d.min_imbalance_gain, 0.0);
  const EplbPolicyConfig c = parse("min_imbalance_gain = 0.05\nredundant_slots = 16\n");
  EXPECT_DOUBLE_EQ(c.min_imbalance_gain, 0.05);
  EXPECT_EQ(c.balance.redundant_slots, 16);
  EXPECT_NE(config_error_of([] { parse("min_imbalance_gain = -1\n"); }).find("min_imbalance_gain"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { parse("redundant_slots = 3\n"); }).find("redundant_slots"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { parse("variant = \"hierarchical\"\n"); }).find("variant"),
            std::string::npos);
  EXPECT_EQ(config_error_of([] { parse("variant = \"hierarchical\"\n", 2); }), "");
  EXPECT_NE(config_error_of([] { parse("ema_alpha = 0\n"); }).find("ema_alpha"), std::string::npos);
  EXPECT_NE(config_error_of([] { parse("period_s = 0\n"); }).find("period_s"), std::string::npos);
  EXPECT_NE(config_error_of([] { parse("perod_s = 5\n"); }).find("unknown key"), std::string::npos);
}

EplbPolicyConfig config(int32_t redundant, LoadAverageKind kind = LoadAverageKind::kExponential,
                        double alpha = 1.0, int32_t window = 4) {
  EplbPolicyConfig c;
  c.balance.redundant_slots = redundant;
  c.balance.average = kind;
  c.balance.ema_alpha = alpha;
  c.balance.window_samples = window;
  return c;
}

// 16 experts on 8 GPUs of one node (2 per GPU), 4 groups.
ExpertPlacement contiguous() { return ExpertPlacement::contiguous(16, 8, 8, 0, "t"); }

std::vector<double> loads_of(std::initializer_list<std::pair<int32_t, double>> hot,
                             double rest = 1.0) {
  std::vector<double> v(16, rest);
  for (auto [e, x] : hot) v[e] = x;
  return v;
}

TEST(EplbRebalancer, EachLayerIsBalancedFromItsOwnAverage) {
  EplbRebalancer ema(config(8, LoadAverageKind::kExponential, 0.5), 3, contiguous(), 4, 1.0);
  ema.observe(0, loads_of({{0, 8.0}}));
  ema.observe(0, loads_of({}));  // layer 0: expert 0 averages (8 + 1) / 2
  ema.observe(1, loads_of({{9, 20.0}, {14, 6.0}}));
  EXPECT_DOUBLE_EQ(ema.load_average().average(0)[0], 4.5);
  const EplbPlan p0 = ema.plan(0, contiguous());
  const EplbPlan p1 = ema.plan(1, contiguous());
  ASSERT_EQ(p0.decision, EplbPlan::Decision::kApply);
  ASSERT_EQ(p1.decision, EplbPlan::Decision::kApply);
  EXPECT_EQ(p0.moe_layer_idx, 0);
  EXPECT_EQ(p1.moe_layer_idx, 1);
  // Each layer's redundant slots go to its own hot experts.
  EXPECT_GE(p0.target->replicas(0).size(), 2u);
  EXPECT_EQ(p0.target->replicas(9).size(), 1u);
  EXPECT_GE(p1.target->replicas(9).size(), 3u);
  EXPECT_EQ(p1.target->replicas(0).size(), 1u);
  // A layer without samples has no plan; the others are unaffected by it.
  EXPECT_EQ(ema.plan(2, contiguous()).decision, EplbPlan::Decision::kNoLoad);
  // One transfer for several layers: the copies of all of them.
  const std::vector<EplbPlan> both = {p0, p1};
  const std::vector<double> traffic = ema.transfer_traffic(both);
  EXPECT_DOUBLE_EQ(std::accumulate(traffic.begin(), traffic.end(), 0.0),
                   static_cast<double>(p0.copies.size() + p1.copies.size()));

  EplbRebalancer win(config(8, LoadAverageKind::kWindow, 0.1, 2), 1, contiguous(), 4, 1.0);
  for (double x : {1.0, 2.0, 3.0}) win.observe(0, loads_of({{3, x}}, 0.0));
  EXPECT_DOUBLE_EQ(win.load_average().average(0)[3], 2.5);  // the last two samples
}

TEST(EplbRebalancer, NoLoadNoPlan) {
  const EplbRebalancer r(config(8), 1, contiguous(), 4, 1.0);
  const EplbPlan plan = r.plan(0, contiguous());
  EXPECT_EQ(plan.decision, EplbPlan::Decision::kNoLoad);
  EXPECT_FALSE(plan.target.has_value());
}

TEST(EplbRebalancer, PlanBalancesAndDiffsAgainstCurrent) {
  EplbRebalancer r(config(8), 1, contiguous(), 4, 100.0);
  // Experts 0 and 1 (both on GPU 0) are hot.
  r.observe(0, loads_of({{0, 40.0}, {1, 30.0}, {2, 10.0}}));
  const ExpertPlacement current = contiguous();
  const EplbPlan plan = r.plan(0, current);
  ASSERT_EQ(plan.decision, EplbPlan::Decision::kApply);
  const ExpertPlacement& target = *plan.target;
  // 24 slots: 3 per GPU; the hot experts get the redundant slots.
  EXPECT_EQ(target.total_slots(), 24);
  for (int32_t g = 0; g < 8; ++g) EXPECT_EQ(target.num_slots(g), 3);
  EXPECT_GE(target.replicas(0).size(), 3u);
  EXPECT_GE(target.replicas(1).size(), 2u);
  // Copies: exactly the (expert, GPU) pairs the target gains, sourced from a current holder.
  int64_t gained = 0;
  for (int32_t e = 0; e < 16; ++e) {
    for (int32_t g : target.replicas(e)) {
      const auto cur = current.replicas(e);
      if (std::find(cur.begin(), cur.end(), g) == cur.end()) ++gained;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(plan.copies.size()), gained);
  for (const ReplicaAddition& c : plan.copies) {
    const auto cur = current.replicas(c.expert_idx);
    EXPECT_NE(std::find(cur.begin(), cur.end(), c.src_gpu_idx), cur.end());
    const auto tgt = target.replicas(c.expert_idx);
    EXPECT_NE(std::find(tgt.begin(), tgt.end(), c.dst_gpu_idx), tgt.end());
  }
  for (const ReplicaRemoval& d : plan.drops) {
    const auto tgt = target.replicas(d.expert_idx);
    EXPECT_EQ(std::find(tgt.begin(), tgt.end(), d.gpu_idx), tgt.end());
  }
  // Transfer bytes: one slot's weights per copy.
  const std::vector<double> traffic = r.transfer_traffic(std::span<const EplbPlan>(&plan, 1));
  EXPECT_DOUBLE_EQ(std::accumulate(traffic.begin(), traffic.end(), 0.0),
                   100.0 * static_cast<double>(plan.copies.size()));
  for (int32_t g = 0; g < 8; ++g) EXPECT_EQ(traffic[g * 8 + g], 0.0);
  // Effect: the predicted imbalance falls from 70+1 on GPU 0 towards the mean.
  EXPECT_GT(plan.current_imbalance, 4.0);
  EXPECT_LT(plan.target_imbalance, 1.5);
  EXPECT_LT(plan.target_imbalance, plan.current_imbalance);

  // Applied, the same loads change nothing: alignment keeps experts where they are.
  const EplbPlan again = r.plan(0, target);
  EXPECT_EQ(again.decision, EplbPlan::Decision::kUnchanged);
  EXPECT_TRUE(again.copies.empty());
  EXPECT_TRUE(again.drops.empty());
}

TEST(EplbRebalancer, AlignmentKeepsExpertsInPlaceUnderRelabelling) {
  // A target that is the current placement with GPUs permuted aligns back to it exactly.
  const ExpertPlacement current = contiguous();
  std::vector<std::vector<int32_t>> permuted(16);
  for (int32_t e = 0; e < 16; ++e) permuted[e] = {7 - current.replicas(e)[0]};
  const ExpertPlacement target(16, 8, 8, 0, permuted, "t");
  const ExpertPlacement aligned = EplbRebalancer::align_to(target, current);
  for (int32_t e = 0; e < 16; ++e) {
    EXPECT_EQ(std::vector<int32_t>(aligned.replicas(e).begin(), aligned.replicas(e).end()),
              std::vector<int32_t>(current.replicas(e).begin(), current.replicas(e).end()));
  }
}

TEST(EplbRebalancer, MinGainSkipsSmallImprovements) {
  EplbPolicyConfig c = config(8);
  c.min_imbalance_gain = 100.0;
  EplbRebalancer r(c, 1, contiguous(), 4, 1.0);
  r.observe(0, loads_of({{0, 40.0}}));
  EXPECT_EQ(r.plan(0, contiguous()).decision, EplbPlan::Decision::kNoGain);
}

TEST(EplbRebalancer, HierarchicalKeepsGroupsOnOneNode) {
  // 2 nodes of 4 GPUs; 4 groups of 4 experts divide over the nodes.
  const ExpertPlacement current = ExpertPlacement::contiguous(16, 8, 4, 0, "t");
  EplbRebalancer r(config(8), 1, current, 4, 1.0);
  EXPECT_TRUE(eplb_is_hierarchical(r.shape()));
  r.observe(0, loads_of({{0, 30.0}, {5, 20.0}, {9, 10.0}}));
  const EplbPlan plan = r.plan(0, current);
  ASSERT_EQ(plan.decision, EplbPlan::Decision::kApply);
  for (int32_t grp = 0; grp < 4; ++grp) {
    const int32_t node = plan.target->replicas(grp * 4)[0] / 4;
    for (int32_t e = grp * 4; e < grp * 4 + 4; ++e) {
      for (int32_t g : plan.target->replicas(e)) EXPECT_EQ(g / 4, node) << e;
    }
  }
  // Copies come from the destination's node when the expert is there.
  for (const ReplicaAddition& c : plan.copies) {
    const auto cur = current.replicas(c.expert_idx);
    const bool on_node =
        std::any_of(cur.begin(), cur.end(), [&](int32_t h) { return h / 4 == c.dst_gpu_idx / 4; });
    if (on_node) {
      EXPECT_EQ(c.src_gpu_idx / 4, c.dst_gpu_idx / 4);
    }
  }
  EXPECT_LT(plan.target_imbalance, plan.current_imbalance);
}

TEST(EplbRebalancer, ImbalanceOfSkewedLoadsFalls) {
  // Zipf-like loads over 16 experts: the balanced placement is close to even.
  std::vector<double> zipf(16);
  for (int32_t e = 0; e < 16; ++e) zipf[e] = 1.0 / std::pow(static_cast<double>(e) + 1.0, 1.1);
  EplbRebalancer r(config(8), 1, contiguous(), 4, 1.0);
  r.observe(0, zipf);
  const EplbPlan plan = r.plan(0, contiguous());
  EXPECT_GT(EplbRebalancer::imbalance(contiguous(), zipf), 2.5);
  EXPECT_LT(EplbRebalancer::imbalance(*plan.target, zipf), 1.25);
  const std::vector<double> g = EplbRebalancer::gpu_loads(*plan.target, zipf);
  EXPECT_NEAR(std::accumulate(g.begin(), g.end(), 0.0),
              std::accumulate(zipf.begin(), zipf.end(), 0.0), 1e-12);
}

}  // namespace
}  // namespace moesim::sim

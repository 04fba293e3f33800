// Done-when of per-layer placement (issue 14): on DeepSeek's EP32 decode setting (128 sequences per
// GPU, deepseek-v3-decode skew), per-layer EPLB with 288 slots cuts the measured per-GPU imbalance
// at least 5x and TPOT p50 measurably, and hot-expert replication cuts TPOT p50: paired
// comparisons against the same scenario without its [policies] table over two seeds, intervals
// excluding zero (docs/policies/eplb.md and hot_expert_replication.md show them over three).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "sim/policy/policy_registry.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"
#include "sim/study/compare.h"

namespace moesim::sim::study {
namespace {

const MetricComparison& metric(const CompareResult& r, const std::string& name) {
  for (const MetricComparison& m : r.metrics) {
    if (m.metric == name) return m;
  }
  ADD_FAILURE() << "no metric " << name;
  return r.metrics.front();
}

// The shipped scenario (B) and the same without its policies (A), compared paired.
struct PolicyComparison {
  Scenario without, with;
  CompareResult result;
};

PolicyComparison compare_shipped(const std::string& rel_path) {
  PolicyComparison c{load_scenario(MOESIM_SOURCE_DIR "/" + rel_path),
                     load_scenario(MOESIM_SOURCE_DIR "/" + rel_path),
                     {}};
  c.without.policies.clear();
  CompareOptions opt;
  opt.seed = c.with.run.seed;
  // Every decode request of one run shares the step time, so resampling requests gives an
  // interval of zero width (not shown): resample seeds instead, the fewest that show the sign.
  opt.num_replications = 2;
  opt.num_resamples = 400;
  opt.num_threads = 2;
  c.result = compare_scenarios(c.without, c.with, opt);
  return c;
}

TEST(PlacementPolicyCompare, EplbOnEp32DecodeCutsImbalanceFiveTimesAndTpot) {
  const PolicyComparison c = compare_shipped("scenarios/policies/eplb_ep32_decode.toml");
  ASSERT_TRUE(c.result.conservation_ok);
  const MetricComparison& tpot = metric(c.result, "tpot_p50_ms");
  ASSERT_TRUE(tpot.has_ci);
  EXPECT_LT(tpot.ci_hi, 0.0) << "TPOT p50 " << tpot.a << " -> " << tpot.b;
  const RunOutput a = run_scenario(c.without, RunOptions{}, -1, {});
  const RunOutput b = run_scenario(c.with, RunOptions{}, -1, make_policies(c.with));
  EXPECT_GE(a.summary.expert_gpu_imbalance_mean, 5.0 * b.summary.expert_gpu_imbalance_mean)
      << a.summary.expert_gpu_imbalance_mean << " -> " << b.summary.expert_gpu_imbalance_mean;
  EXPECT_EQ(b.counters.actions.at("eplb_apply"), 1);
}

TEST(PlacementPolicyCompare, HotExpertReplicationOnEp32DecodeCutsTpot) {
  const PolicyComparison c =
      compare_shipped("scenarios/policies/hot_expert_replication_ep32_decode.toml");
  ASSERT_TRUE(c.result.conservation_ok);
  const MetricComparison& tpot = metric(c.result, "tpot_p50_ms");
  ASSERT_TRUE(tpot.has_ci);
  EXPECT_LT(tpot.ci_hi, 0.0) << "TPOT p50 " << tpot.a << " -> " << tpot.b;
}

// Hot sets that last ~100 steps (drift, mean_epoch_steps = 100: about 5 s at this scenario's
// steps) against the rebalance period: the shorter the period, the closer the placement follows
// them (measured over 35 s on 2026-12-03: per-GPU imbalance 1.51 static, 1.25 every 16 s, 0.69
// every 4 s, 0.33 every 1 s; docs/policies/eplb.md, "Hot-set persistence").
TEST(PlacementPolicyCompare, EplbFollowsDriftingHotSetsWhenThePeriodIsShorterThanTheirLife) {
  const std::string dir = MOESIM_SOURCE_DIR "/scenarios/policies";
  std::ifstream in(dir + "/eplb_ep32_decode.toml");
  std::stringstream text;
  text << in.rdbuf();
  auto replaced = [](std::string t, const std::string& from, const std::string& to) {
    const size_t pos = t.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return pos == std::string::npos ? t : t.replace(pos, from.size(), to);
  };
  const std::string drifting =
      replaced(text.str(), "preset = \"deepseek-v3-decode\"\n",
               "preset = \"deepseek-v3-decode\"\n[routing.drift]\nenabled = true\n"
               "mean_epoch_steps = 100\n");
  // Per-GPU imbalance per layer and step with the policy every period_s (0: without it).
  auto imbalance = [&](const std::string& period_s) {
    Scenario sc =
        parse_scenario_text(replaced(drifting, "period_s = 2\n", "period_s = " + period_s + "\n"),
                            "eplb_drift.toml", dir);
    if (period_s == "0") sc.policies.clear();
    const RunOutput out = run_scenario(sc, RunOptions{}, -1, make_policies(sc));
    EXPECT_TRUE(out.conservation_ok) << out.conservation_message;
    return out.summary.expert_gpu_imbalance_mean;
  };
  const double none = imbalance("0"), slow = imbalance("16"), mid = imbalance("4"),
               fast = imbalance("1");
  EXPECT_LT(slow, none);
  EXPECT_LT(mid, slow);
  EXPECT_LT(fast, mid);
  EXPECT_LT(fast, 0.5 * mid) << none << " " << slow << " " << mid << " " << fast;
}

}  // namespace
}  // namespace moesim::sim::study

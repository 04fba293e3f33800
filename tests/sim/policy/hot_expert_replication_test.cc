#include "sim/policy/hot_expert_replication.h"

#include <gtest/gtest.h>

#include "sim/config/toml_source.h"
#include "sim/routing/count_matrix.h"
#include "tests/support/config_errors.h"

namespace moesim::sim {
namespace {

using testing::config_error_of;

HotExpertReplicationConfig parse(const std::string& text) {
  TomlDocument doc = TomlDocument::parse_string(text, "p.toml");
  TomlTable t = doc.root();
  return parse_hot_expert_replication_config(t);
}

TEST(HotExpertReplicationConfig, DefaultsAndErrors) {
  const HotExpertReplicationConfig d = parse("");
  EXPECT_DOUBLE_EQ(d.window_s, 300.0);
  EXPECT_DOUBLE_EQ(d.top_fraction, 0.1);
  EXPECT_EQ(d.target, HotExpertReplicationConfig::Target::kEveryNode);
  EXPECT_EQ(d.k, 2);
  EXPECT_DOUBLE_EQ(d.period_s, 60.0);
  EXPECT_EQ(d.max_extra_slots_per_gpu, 2);
  const HotExpertReplicationConfig c = parse("target = \"k_gpus\"\nk = 3\nwindow_s = 10\n");
  EXPECT_EQ(c.target, HotExpertReplicationConfig::Target::kKGpus);
  EXPECT_EQ(c.k, 3);
  EXPECT_NE(config_error_of([] { parse("target = \"all\"\n"); }).find("every_node"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { parse("top_fraction = 0\n"); }).find("top_fraction"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { parse("k = 0\n"); }).find("k"), std::string::npos);
  EXPECT_NE(config_error_of([] { parse("windows = 3\n"); }).find("unknown key"), std::string::npos);
}

TEST(ExpertLoadWindow, SumsTheLastBuckets) {
  // 10 s window in 5 buckets of 2 s.
  ExpertLoadWindow w(2, from_seconds(10.0), 5);
  w.add(from_seconds(0.5), std::vector<double>{1, 0});
  w.add(from_seconds(1.5), std::vector<double>{1, 2});
  w.add(from_seconds(9.0), std::vector<double>{0, 4});
  EXPECT_EQ(w.loads(from_seconds(9.5)), (std::vector<double>{2, 6}));
  // At 10 s the bucket [0, 2) leaves the window.
  EXPECT_EQ(w.loads(from_seconds(10.0)), (std::vector<double>{0, 4}));
  w.add(from_seconds(30.0), std::vector<double>{5, 5});
  EXPECT_EQ(w.loads(from_seconds(30.0)), (std::vector<double>{5, 5}));
}

// 16 experts on 8 GPUs (2 per GPU), 2 nodes of 4 GPUs; experts 0 (GPU 0) and 9 (GPU 4) hot.
ExpertPlacement base_placement() { return ExpertPlacement::contiguous(16, 8, 4, 0, "t"); }
std::vector<double> loads_hot(std::initializer_list<std::pair<int32_t, double>> hot) {
  std::vector<double> loads(16, 1.0);
  for (auto [e, l] : hot) loads[e] = l;
  return loads;
}

TEST(HotExpertReplication, EveryNodeReplicatesHottestToTheOtherNode) {
  HotExpertReplicationConfig c;
  c.top_fraction = 0.125;  // 2 of 16
  const HotExpertReplication policy(c, base_placement(), 1000.0);
  ExpertPlacement current = base_placement();
  const ReplicationPlan plan = policy.plan(loads_hot({{0, 100}, {9, 80}}), current);
  EXPECT_EQ(plan.hot_experts, (std::vector<int32_t>{0, 9}));
  ASSERT_EQ(plan.additions.size(), 2u);
  // Expert 0 to node 1: GPU 4 carries hot expert 9, so the lightest is GPU 5.
  EXPECT_EQ(plan.additions[0].expert_idx, 0);
  EXPECT_EQ(plan.additions[0].src_gpu_idx, 0);
  EXPECT_EQ(plan.additions[0].dst_gpu_idx, 5);
  // Expert 9 to node 0: GPU 0 still carries half of expert 0, so GPU 1.
  EXPECT_EQ(plan.additions[1].expert_idx, 9);
  EXPECT_EQ(plan.additions[1].src_gpu_idx, 4);
  EXPECT_EQ(plan.additions[1].dst_gpu_idx, 1);
  EXPECT_TRUE(plan.removals.empty());

  const std::vector<double> traffic = policy.transfer_traffic(plan);
  EXPECT_EQ(traffic[0 * 8 + 5], 1000.0);
  EXPECT_EQ(traffic[4 * 8 + 1], 1000.0);
  double total = 0;
  for (double b : traffic) total += b;
  EXPECT_EQ(total, 2000.0);
  EXPECT_EQ(policy.extra_weight_bytes_per_gpu(plan),
            (std::vector<double>{0, 1000, 0, 0, 0, 1000, 0, 0}));

  HotExpertReplication::apply(plan, current);
  EXPECT_EQ(current.total_slots(), 18);
  // Tokens go to the nearest replica: GPU 6 (node 1) sends its expert-0 selections to GPU 5.
  CountMatrix src_expert;
  src_expert.reset(8, 16);
  src_expert.at(6, 0) = 10;
  src_expert.at(2, 0) = 7;
  CountMatrix src_dst;
  ReplicaDispatcher dispatcher;
  dispatcher.dispatch(current, src_expert, src_dst);
  EXPECT_EQ(src_dst.at(6, 5), 10);
  EXPECT_EQ(src_dst.at(2, 0), 7);

  // Same loads again: nothing to do.
  EXPECT_TRUE(policy.plan(loads_hot({{0, 100}, {9, 80}}), current).empty());
  // The hot set moves to expert 3: the old extra replicas go, expert 3 gains one on node 1.
  const ReplicationPlan next = policy.plan(loads_hot({{3, 100}}), current);
  EXPECT_EQ(next.hot_experts, (std::vector<int32_t>{3, 0}));  // then the first of the ties
  ASSERT_EQ(next.removals.size(), 1u);
  EXPECT_EQ(next.removals[0].expert_idx, 9);
  EXPECT_EQ(next.removals[0].gpu_idx, 1);
  EXPECT_EQ(policy.freed_weight_bytes_per_gpu(next)[1], 1000.0);
  // Expert 0 (tied for second) keeps its replica on GPU 5: no copy for it.
  ASSERT_EQ(next.additions.size(), 1u);
  EXPECT_EQ(next.additions[0].expert_idx, 3);
  EXPECT_EQ(next.additions[0].src_gpu_idx, 1);
  EXPECT_GE(next.additions[0].dst_gpu_idx, 4);
}

TEST(HotExpertReplication, KGpusRespectsExtraSlotCapacity) {
  HotExpertReplicationConfig c;
  c.target = HotExpertReplicationConfig::Target::kKGpus;
  c.k = 3;
  c.top_fraction = 0.25;  // 4 hot experts wanting 12 copies
  c.max_extra_slots_per_gpu = 1;
  const HotExpertReplication policy(c, base_placement(), 1.0);
  const ExpertPlacement current = base_placement();
  const ReplicationPlan plan =
      policy.plan(loads_hot({{0, 50}, {1, 40}, {2, 30}, {3, 20}}), current);
  // Experts 0 and 1 fill GPUs 2-7, expert 2 takes GPU 0; GPU 1 hosts experts 2 and 3 itself,
  // so 5 of the 12 wanted copies find no slot.
  EXPECT_EQ(plan.additions.size(), 7u);
  EXPECT_EQ(plan.num_skipped_for_capacity, 5);
  std::vector<int32_t> per_gpu(8, 0);
  for (const ReplicaAddition& a : plan.additions) ++per_gpu[a.dst_gpu_idx];
  EXPECT_EQ(per_gpu, (std::vector<int32_t>{1, 0, 1, 1, 1, 1, 1, 1}));
  // The hottest expert got its full k.
  int32_t copies_of_0 = 0;
  for (const ReplicaAddition& a : plan.additions) copies_of_0 += a.expert_idx == 0 ? 1 : 0;
  EXPECT_EQ(copies_of_0, 3);
  ExpertPlacement applied = current;
  HotExpertReplication::apply(plan, applied);
  EXPECT_EQ(applied.max_slots_per_gpu(), 3);
}

TEST(HotExpertReplication, ZeroLoadsAreNeverHot) {
  HotExpertReplicationConfig c;
  c.top_fraction = 1.0;
  const HotExpertReplication policy(c, base_placement(), 1.0);
  const ReplicationPlan plan = policy.plan(std::vector<double>(16, 0.0), base_placement());
  EXPECT_TRUE(plan.hot_experts.empty());
  EXPECT_TRUE(plan.empty());
}

}  // namespace
}  // namespace moesim::sim

// Replay planning: layer profiles, default GPU choice, memory plan totals.
#include "engine/replay_plan.h"

#include <gtest/gtest.h>

#include <limits>

#include "engine/cpu/cpu_backend.h"
#include "engine/input_error.h"
#include "engine/layer_weights.h"

namespace moesim::engine {
namespace {

const std::string kTracePath =
    std::string(MOESIM_SOURCE_DIR) + "/tests/data/engine/tiny_steps.jsonl";

TraceModel model_with_layers(int n) {
  TraceModel m;
  m.name = "m";
  for (int i = 0; i < n; ++i) {
    TraceLayer l;
    l.layer_idx = i;
    l.attention_kind = AttentionKind::kMla;
    l.mla = MlaShape{64, 2, 0, 16, 8, 4, 8};
    l.is_moe = i > 0;
    l.intermediate_size = 128;
    l.num_routed_experts = 4;
    l.top_k = 2;
    l.expert_intermediate_size = 32;
    m.layers.push_back(l);
  }
  return m;
}

TEST(SelectLayers, Profiles) {
  const TraceModel m = model_with_layers(7);  // 1 dense + 6 MoE
  const auto sample = select_layers("sample", m);
  ASSERT_EQ(sample.size(), 2u);
  EXPECT_EQ(sample[0].layer_idx, 0);
  EXPECT_EQ(sample[0].scale, 1);
  EXPECT_EQ(sample[1].layer_idx, 1);
  EXPECT_EQ(sample[1].scale, 6);
  const auto every = select_layers("every:3", m);
  ASSERT_EQ(every.size(), 3u);
  EXPECT_EQ(every[2].layer_idx, 6);
  EXPECT_EQ(every[2].scale, 1);
  EXPECT_EQ(every[0].scale, 3);
  EXPECT_EQ(select_layers("all", m).size(), 7u);
  EXPECT_EQ(select_layers("5,2", m)[0].layer_idx, 2);
  EXPECT_THROW(select_layers("every:0", m), InputError);
  EXPECT_THROW(select_layers("first", m), InputError);
  EXPECT_THROW(select_layers("1,1", m), InputError);
}

TEST(SelectGpus, HottestAndColdestByRoutedTokens) {
  StepTrace t = read_step_trace(kTracePath);
  // Two GPUs: both play.
  EXPECT_EQ(select_gpus(t, {}), (std::vector<int32_t>{0, 1}));
  const std::vector<int64_t> routed = routed_tokens_per_gpu(t);
  EXPECT_EQ(routed[0] + routed[1], 2 * (2 * 10 + 2 * 5));  // top-2, 10 + 5 tokens, 2 layers
  // Pretend the topology has 4 GPUs (2 and 3 idle): hottest GPU first, then an idle one.
  t.topology.num_gpus = 4;
  const int32_t hottest = routed[0] >= routed[1] ? 0 : 1;
  EXPECT_EQ(select_gpus(t, {}), (std::vector<int32_t>{hottest, 2}));
  EXPECT_EQ(select_gpus(t, {3}), (std::vector<int32_t>{3}));
}

TEST(MemoryPlan, WeightsMatchWhatTheBuilderAllocates) {
  const StepTrace t = read_step_trace(kTracePath);
  auto backend = cpu::make_cpu_backend({});
  for (const char* experts : {"bf16", "fp8"}) {
    const ReplayDtypes d = resolve_dtypes(t.model.dtypes, *backend, experts);
    const ReplayMemoryPlan plan = plan_memory(t, select_layers("all", t.model), 0, d);
    int64_t built = 0;
    for (const TraceLayer& l : t.model.layers) {
      built += build_layer_weights(*backend, l, 8, d, 1).allocated_bytes;
    }
    EXPECT_EQ(plan.weight_bytes, built) << experts;
    EXPECT_GT(plan.cache_bytes, 0);
    EXPECT_GT(plan.activation_bytes, 0);
  }
}

TEST(MemoryPlan, SizesBeyondInt64SaturateInsteadOfWrapping) {
  StepTrace t = read_step_trace(kTracePath);
  for (TraceStep& step : t.steps) {
    for (TraceSequence& s : step.sequences)
      s.context_tokens = int64_t{9} * 1'000'000'000'000'000'000;
  }
  auto backend = cpu::make_cpu_backend({});
  const ReplayDtypes d = resolve_dtypes(t.model.dtypes, *backend, "bf16");
  const ReplayMemoryPlan plan = plan_memory(t, select_layers("all", t.model), 0, d);
  EXPECT_EQ(plan.cache_bytes, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(plan.total_bytes(), std::numeric_limits<int64_t>::max());
  EXPECT_GT(plan.weight_bytes, 0);
}

}  // namespace
}  // namespace moesim::engine

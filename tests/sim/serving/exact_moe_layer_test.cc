// The exact fidelity's MoE layer on hand-computed cases (moe_layer_rig.h: 8 GPUs, 64 tokens per
// GPU, every source's selections spread evenly): the selections each destination receives, and
// the micro-batch contract (micro-batch 0 takes its sources' share of every pair's selections,
// micro-batch 1 the rest, and the whole layer's come back at the end).
#include "sim/serving/exact_moe_layer.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/sim/serving/moe_layer_rig.h"

namespace moesim::sim {
namespace {

using testing::LayerRig;
using testing::tiny;

TEST(ExactMoeLayer, EveryDestinationReceivesItsShareOfEverySourcesSelections) {
  LayerRig rig(false);
  const int64_t k = tiny().layers[1].ffn.moe.top_k;
  const CollectiveTimes t = rig.run();
  // 8 sources x 64 tokens x k selections, an eighth of each to every destination.
  for (const int64_t sel : rig.model->selections()) EXPECT_EQ(sel, 8 * 64 * k / 8);
  EXPECT_GT(t.dispatch_s, 0);
  EXPECT_GT(t.combine_bytes, t.dispatch_bytes);  // combine rows twice as wide in the rig
}

TEST(ExactMoeLayer, MicrobatchesSplitTheSelectionsAndRestoreTheWhole) {
  LayerRig rig(false);
  const MoeSpec& moe = tiny().layers[1].ffn.moe;
  const int64_t k = moe.top_k;
  const MoeLayerCall call{0, 1, 0, &moe, /*microbatched=*/true, false, nullptr};
  const CollectiveTimes whole = rig.model->run(call, rig.state);
  EXPECT_EQ(whole.dispatch_s, 0);  // priced per micro-batch instead
  const std::vector<int64_t> whole_tokens = rig.state.gpu_tokens;
  const std::vector<int64_t> mb0_tokens(8, 16);  // a quarter of each GPU's 64 tokens
  rig.model->begin_microbatches();
  int64_t sum[2] = {0, 0};
  for (int32_t mb = 0; mb < 2; ++mb) {
    rig.model->split_microbatch(mb, whole_tokens, mb0_tokens, 8 * 64, 8 * 16);
    rig.state.gpu_tokens.assign(8, mb == 0 ? 16 : 48);
    ++rig.state.tokens_version;
    const CollectiveTimes t = rig.model->time_microbatch(mb, moe, rig.state);
    EXPECT_GT(t.dispatch_s, 0);
    for (const int64_t sel : rig.model->selections()) sum[mb] += sel;
  }
  // Each pair's 8k selections: round(8k x 16 / 64) = 2k to micro-batch 0, 6k to micro-batch 1.
  EXPECT_EQ(sum[0], 64 * 2 * k);
  EXPECT_EQ(sum[1], 64 * 6 * k);
  rig.state.gpu_tokens = whole_tokens;
  ++rig.state.tokens_version;
  rig.model->end_microbatches(call, CollectiveTimes{}, rig.state);
  for (const int64_t sel : rig.model->selections()) EXPECT_EQ(sel, 8 * 64 * k / 8);
}

}  // namespace
}  // namespace moesim::sim

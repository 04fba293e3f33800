// The fast fidelity's MoE layer against the exact one, directly, on the same inputs
// (moe_layer_rig.h): both draw the same selections, and their collectives differ only by the fast
// model's product-form reach.
#include "sim/serving/fast_moe_layer.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/sim/serving/moe_layer_rig.h"

namespace moesim::sim {
namespace {

using testing::LayerRig;
using testing::tiny;

TEST(FastMoeLayer, DrawsTheExactLayersSelectionsAndTimesItsCollectivesClosely) {
  ASSERT_TRUE(tiny().layers[1].ffn.is_moe);
  LayerRig exact(false), fast(true);
  const CollectiveTimes e = exact.run();
  const CollectiveTimes f = fast.run();
  // The same selections per destination, so the same expert seconds on every GPU.
  ASSERT_EQ(exact.model->selections().size(), 8u);
  for (size_t d = 0; d < 8; ++d) {
    EXPECT_EQ(fast.model->selections()[d], exact.model->selections()[d]) << d;
    EXPECT_EQ(fast.pricer->ffn_s()[d], exact.pricer->ffn_s()[d]) << d;
  }
  EXPECT_EQ(fast.state.result.num_fast_layers, 1);
  EXPECT_EQ(fast.state.result.num_exact_layers, 0);
  EXPECT_EQ(exact.state.result.num_fast_layers + exact.state.result.num_exact_layers, 0);
  // The collectives: product-form reach against per-pair unique tokens.
  EXPECT_GT(e.dispatch_s, 0);
  EXPECT_NEAR(f.dispatch_s / e.dispatch_s, 1.0, 0.05);
  EXPECT_NEAR(f.combine_s / e.combine_s, 1.0, 0.05);
  EXPECT_NEAR(f.dispatch_bytes / e.dispatch_bytes, 1.0, 0.05);
}

// A background transfer in flight keeps the layer on the exact fidelity: the fast model's times
// are the exact model's bit for bit, and the layer counts as left to the exact fidelity.
TEST(FastMoeLayer, FallsBackToTheExactLayerWhileABackgroundTransferIsInFlight) {
  auto with_transfer = [](std::vector<BackgroundTransfer>& transfers) {
    StepModelOptions o;
    o.background = &transfers;
    o.background_chunk_bytes = 1 << 20;
    return o;
  };
  std::vector<BackgroundTransfer> a{{1, std::vector<double>(64, 4e6)}};
  std::vector<BackgroundTransfer> b = a;
  LayerRig exact(false, with_transfer(a)), fast(true, with_transfer(b));
  const CollectiveTimes e = exact.run();
  const CollectiveTimes f = fast.run();
  EXPECT_EQ(f.dispatch_s, e.dispatch_s);
  EXPECT_EQ(f.combine_s, e.combine_s);
  EXPECT_EQ(f.dispatch_bytes, e.dispatch_bytes);
  EXPECT_EQ(fast.state.result.num_fast_layers, 0);
  EXPECT_EQ(fast.state.result.num_exact_layers, 1);
  // Both carried one chunk of the transfer on every pair.
  EXPECT_EQ(a[0].remaining_bytes, b[0].remaining_bytes);
  EXPECT_LT(b[0].remaining_total(), 64 * 4e6);
}

}  // namespace
}  // namespace moesim::sim

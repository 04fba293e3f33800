#include "sim/placement/layer_placements.h"

#include <gtest/gtest.h>

#include <set>

namespace moesim::sim {
namespace {

ExpertPlacement contiguous() { return ExpertPlacement::contiguous(16, 4, 4, 0, "test"); }
ExpertPlacement strided() { return ExpertPlacement::strided(16, 4, 4, 0, "test"); }

// Caches in the step model and the routing model keep what they derived from a layer's
// placement while its version stays: every change gives the layer a version never seen before,
// and only that layer.
TEST(LayerPlacements, EveryChangeGivesTheLayerANewVersion) {
  LayerPlacements p(3, contiguous());
  EXPECT_NE(p.version(0), 0u);
  EXPECT_EQ(p.version(0), p.version(2));  // equal layers may share one
  std::set<uint64_t> seen = {p.version(0)};
  auto changed = [&](int32_t layer) {
    EXPECT_TRUE(seen.insert(p.version(layer)).second) << "layer " << layer;
  };
  const uint64_t v2 = p.version(2);
  p.add_replica(1, 0, 3);
  changed(1);
  p.remove_replica(1, 0, 3);
  changed(1);
  p.set_layer(0, strided());
  changed(0);
  EXPECT_EQ(p.version(2), v2);
  p.set_all(contiguous());
  changed(0);
  EXPECT_EQ(p.version(1), p.version(0));
  EXPECT_EQ(p.version(2), p.version(0));
  // A copy holds the same placements under the same versions; a new object gets new ones.
  const LayerPlacements copy = p;
  EXPECT_EQ(copy.version(1), p.version(1));
  const LayerPlacements other(3, contiguous());
  EXPECT_TRUE(seen.insert(other.version(0)).second);
}

}  // namespace
}  // namespace moesim::sim

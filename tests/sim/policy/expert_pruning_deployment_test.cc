#include "sim/policy/expert_pruning_deployment.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

TEST(ExpertPruningDeployment, PrunedCardAndRepackedPlacement) {
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

}  // namespace
}  // namespace moesim::sim

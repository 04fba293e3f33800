// Synthetic, seeded weights of one layer with the card's real shapes and the replay's dtypes.
// Values are synthetic_value() * 1/sqrt(fan_in) (norm weights: 1 + 0.1 * synthetic), so
// activations keep a sane range through the layer; FP8 experts store synthetic * 256 with an
// FP32 dequantisation scale of 1/(256 sqrt(fan_in)). Contents never matter for timing; the seed
// makes them reproducible anyway.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/replay_plan.h"
#include "engine/step_trace.h"

namespace moesim::engine {

struct LayerWeights {
  Tensor attn_norm;  // [hidden]
  Tensor ffn_norm;   // [hidden]
  MlaWeights mla;    // by the layer's attention kind
  GqaWeights gqa;
  KdaWeights kda;
  FfnWeights dense;  // dense layers
  RouterWeights router;
  FfnWeights experts;  // the GPU's local experts (num_experts = local count)
  FfnWeights shared;   // all shared experts fused into one FFN (intermediate = n * size)
  int64_t allocated_bytes = 0;
  std::vector<DeviceTensor> storage;
};

// Allocates and fills the layer's weights on `backend` (throws OutOfMemoryError). The result's
// allocated_bytes equals layer_weight_bytes(layer, num_local_experts, dtypes).
LayerWeights build_layer_weights(Backend& backend, const TraceLayer& layer,
                                 int64_t num_local_experts, const ReplayDtypes& dtypes,
                                 uint64_t root_seed);

}  // namespace moesim::engine

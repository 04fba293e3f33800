// What a replay will run, decided before anything is allocated: the layers (replay profile),
// the simulated GPUs, the dtypes, and the device memory it needs. Every refusal is an
// InputError naming the mismatch (or an OutOfMemoryError with bytes requested and available).
// Replay profiles (--layers: all, sample, every:N, a list) scale each layer run by the number of
// layers it stands for; docs/engine.md ("Replay profiles") has the table.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/measurement.h"
#include "engine/step_trace.h"

namespace moesim::engine {

// Parses a profile (above) against the trace's model. Throws InputError for an unknown profile,
// N < 1, or a listed layer the model does not have.
std::vector<LayerRun> select_layers(const std::string& profile, const TraceModel& model);

// Tokens each GPU's experts executed over the whole trace (index = GPU).
std::vector<int64_t> routed_tokens_per_gpu(const StepTrace& trace);

// The simulated GPUs to play: `requested` when not empty (each must exist in the topology:
// InputError otherwise); else every GPU when the topology has at most 2, else the hottest and
// the coldest GPU by routed_tokens_per_gpu (ties: lower index), hottest first.
std::vector<int32_t> select_gpus(const StepTrace& trace, const std::vector<int32_t>& requested);

// The storage dtypes the replay runs with. Routed experts run FP8 when the trace says fp8,
// mxfp8, mxfp4 or nvfp4 (the nearest format engines run) and `expert_override` is empty;
// everything else runs BF16 (FP32 state stays FP32).
struct ReplayDtypes {
  DType attention = DType::kBF16;
  DType dense_ffn = DType::kBF16;
  DType experts = DType::kBF16;
  DType shared_experts = DType::kBF16;
  DType kv_cache = DType::kBF16;
  DType dispatch = DType::kBF16;  // FP8 when the trace dispatches in an 8-bit or smaller format
  DType activations = DType::kBF16;
};
// The dtypes for `trace` and `expert_override`, whatever the backend. Throws InputError when
// expert_override is not "", "bf16" or "fp8".
ReplayDtypes replay_dtypes(const TraceDtypes& trace, const std::string& expert_override);
// replay_dtypes(), and InputError when the experts would run FP8 on a backend without FP8
// support (naming the trace dtype and the backend).
ReplayDtypes resolve_dtypes(const TraceDtypes& trace, const Backend& backend,
                            const std::string& expert_override);

// The largest per-step quantities of one simulated GPU over the trace: buffers are sized once
// from these and reused by every step and layer.
struct GpuExtents {
  int64_t max_tokens = 0;  // new tokens of the GPU's sequences
  int64_t max_prefill_sequences = 0;
  int64_t max_decode_sequences = 0;
  int64_t max_prefill_cache_rows = 0;  // AttentionBatch::total_cache_rows of the prefill batch
  int64_t max_decode_cache_rows = 0;
  int64_t max_received_rows = 0;  // token copies the GPU's experts execute (any MoE layer)
  int64_t max_sent_rows = 0;      // the GPU's tokens times top_k (any MoE layer)
};
GpuExtents gpu_extents(const StepTrace& trace, int32_t gpu);

// Bytes of the weights of `layer` on a GPU holding `num_local_experts` routed experts.
int64_t layer_weight_bytes(const TraceLayer& layer, int64_t num_local_experts,
                           const ReplayDtypes& dtypes);

// Device memory of one simulated GPU's replay, one line per section.
struct ReplayMemoryPlan {
  int64_t weight_bytes = 0;      // every selected layer's weights (local experts only)
  int64_t cache_bytes = 0;       // KV / latent caches and KDA state, sized for the largest step
  int64_t activation_bytes = 0;  // activations and MoE buffers, sized for the largest step
  // The sum, saturating at INT64_MAX (each section already saturates).
  int64_t total_bytes() const {
    int64_t sum = 0;
    for (int64_t x : {weight_bytes, cache_bytes, activation_bytes}) {
      if (__builtin_add_overflow(sum, x, &sum)) return std::numeric_limits<int64_t>::max();
    }
    return sum;
  }
};

// Number of routed experts with a replica on `gpu` under `placement`.
int64_t num_local_experts(const TracePlacement& placement, int32_t gpu);

ReplayMemoryPlan plan_memory(const StepTrace& trace, const std::vector<LayerRun>& layers,
                             int32_t gpu, const ReplayDtypes& dtypes);
// The same for steps bounded by `extents` (the serving loop sizes them from its scheduler's
// limits, not from recorded steps).
ReplayMemoryPlan plan_memory(const StepTrace& trace, const std::vector<LayerRun>& layers,
                             int32_t gpu, const ReplayDtypes& dtypes, const GpuExtents& extents);

}  // namespace moesim::engine

// The buffers and views GpuExecutor (engine/gpu_executor.h) plays a step with: one set per
// simulated GPU, sized once by the step extents and reused by every step and layer, and the
// output head as column tiles of the backend's router op.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/measurement.h"
#include "engine/replay_plan.h"
#include "engine/step_trace.h"

namespace moesim::engine {

// The output head runs as the backend's router op (logits GEMM + softmax + top-1 pick: greedy
// sampling) over column tiles of the vocabulary shard, at most this many columns each: the CUDA
// router's top-k kernel handles up to 1024 columns, and no other backend op is a plain GEMM.
inline constexpr int64_t kLmHeadTileColumns = 1024;

// The record of the output head: one op per step after the last layer, layer -1, scale 1.
inline const LayerRun kLmHeadRun{-1, 1};

// Buffers of one simulated GPU, sized by the memory plan's extents.
struct GpuBuffers {
  std::vector<DeviceTensor> storage;
  Tensor x, normed, attn_out, shared_out;      // [T, hidden]
  Tensor router_ids, router_weights;           // [sent rows] I32 / FP32
  Tensor permuted, slots;                      // [sent rows, hidden]
  Tensor expert_in, expert_out;                // [received rows, hidden]
  Tensor a2a_send, a2a_recv;                   // [sent / received rows, hidden], dispatch dtype
  Tensor mla_prefill_cache, mla_decode_cache;  // [rows * width] flat
  Tensor gqa_prefill_cache, gqa_decode_cache;  // K then V, flat
  Tensor kda_prefill_state, kda_decode_state;  // FP32 flat
};

// Per-row and per-sequence state widths, in elements.
struct StateSizes {
  int64_t mla_row = 0;  // kv_lora + rope
  int64_t gqa_row = 0;  // kv_heads * d (each of K and V)
  int64_t kda_recurrent = 0;
  int64_t kda_conv = 0;
};

// The output head's weight tiles and its per-row outputs.
struct LmHead {
  std::vector<DeviceTensor> storage;
  std::vector<RouterWeights> tiles;  // w_gate [hidden, tile columns]
  std::vector<RouterConfig> configs;
  Tensor ids, probs;  // [max tokens, 1] I32 / FP32
  int64_t vocab = 0;
};

// Context lengths of a batch, for the op records.
struct ContextStats {
  int64_t sum = 0;
  int64_t max = 0;
};

// A [num_rows, cols] view starting at row `row_begin` of a buffer holding rows of `cols`.
Tensor rows_view(const Tensor& buffer, int64_t row_begin, int64_t num_rows, int64_t cols);

// The same bytes with another shape (no larger than the buffer).
Tensor reshaped(const Tensor& buffer, const Shape& shape);

// A view of the first `experts` experts of an FFN's weights.
FfnWeights first_experts(const FfnWeights& w, int64_t experts);

// The widest cache row and state of each attention kind among `layers` (buffers of one kind are
// shared by its layers).
StateSizes state_sizes(const StepTrace& trace, const std::vector<LayerRun>& layers);

// Allocates and fills (synthetic values) a GPU's buffers for steps within `x`.
GpuBuffers allocate_buffers(Backend& backend, const StepTrace& trace, const GpuExtents& x,
                            const StateSizes& st, const ReplayDtypes& d, uint64_t seed);

// The output head of `gpu` (lm_head_vocab columns in tiles) for up to `max_rows` rows.
LmHead build_lm_head(Backend& backend, const StepTrace& trace, int32_t gpu, int64_t max_rows,
                     DType dtype, uint64_t seed);

// Sum and maximum of the batch's context lengths.
ContextStats context_stats(const AttentionBatch& batch);

}  // namespace moesim::engine

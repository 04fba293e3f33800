#include "engine/gpu_buffers.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "engine/gpu_executor.h"
#include "engine/synthetic.h"

namespace moesim::engine {

Tensor rows_view(const Tensor& buffer, int64_t row_begin, int64_t num_rows, int64_t cols) {
  const int64_t row_bytes = cols * dtype_size_bytes(buffer.dtype);
  MOESIM_CHECK((row_begin + num_rows) * row_bytes <= buffer.size_bytes(),
               "replay buffer too small for the step (memory plan out of date)");
  return Tensor{
      static_cast<char*>(buffer.data) + row_begin * row_bytes, buffer.dtype, {num_rows, cols}};
}

Tensor reshaped(const Tensor& buffer, const Shape& shape) {
  const Tensor t{buffer.data, buffer.dtype, shape};
  MOESIM_CHECK(t.size_bytes() <= buffer.size_bytes(), "replay buffer too small");
  return t;
}

FfnWeights first_experts(const FfnWeights& w, int64_t experts) {
  FfnWeights v = w;
  v.num_experts = experts;
  v.gate_up.shape[0] = experts;
  v.down.shape[0] = experts;
  if (!v.gate_up_scale.empty()) {
    v.gate_up_scale.shape = {experts};
    v.down_scale.shape = {experts};
  }
  return v;
}

StateSizes state_sizes(const StepTrace& trace, const std::vector<LayerRun>& layers) {
  StateSizes s;
  for (const LayerRun& r : layers) {
    const TraceLayer& l = trace.model.layers[r.layer_idx];
    if (l.attention_kind == AttentionKind::kMla) {
      s.mla_row = std::max(s.mla_row, l.mla.kv_lora_rank + l.mla.qk_rope_head_dim);
    } else if (l.attention_kind == AttentionKind::kGqa) {
      s.gqa_row = std::max(s.gqa_row, l.gqa.num_kv_heads * l.gqa.head_dim);
    } else {
      const KdaShape& k = l.kda;
      s.kda_recurrent = std::max(s.kda_recurrent, k.num_heads * k.head_dim_k * k.head_dim_v);
      s.kda_conv = std::max(
          s.kda_conv, (k.short_conv_kernel - 1) * k.num_heads * (2 * k.head_dim_k + k.head_dim_v));
    }
  }
  return s;
}

GpuBuffers allocate_buffers(Backend& backend, const StepTrace& trace, const GpuExtents& x,
                            const StateSizes& st, const ReplayDtypes& d, uint64_t seed) {
  GpuBuffers b;
  const int64_t hidden = trace.model.hidden_size;
  const int64_t t = std::max<int64_t>(x.max_tokens, 1);
  const int64_t sent = std::max<int64_t>(x.max_sent_rows, 1);
  const int64_t recv = std::max<int64_t>(x.max_received_rows, 1);
  uint64_t id = 1u << 20;
  auto make = [&](DType dtype, const Shape& shape, const char* name, float scale) {
    b.storage.push_back(backend.allocate(dtype, shape, name));
    if (dtype != DType::kI32 && shape_num_elements(shape) > 0) {
      backend.fill_synthetic(b.storage.back().view, synthetic_seed(seed, id++), scale);
    }
    return b.storage.back().view;
  };
  b.x = make(d.activations, {t, hidden}, "activations", 1.0f);
  b.normed = make(d.activations, {t, hidden}, "normed activations", 1.0f);
  b.attn_out = make(d.activations, {t, hidden}, "attention output", 1.0f);
  b.shared_out = make(d.activations, {t, hidden}, "shared expert output", 1.0f);
  b.router_ids = make(DType::kI32, {sent}, "router ids", 0);
  b.router_weights = make(DType::kF32, {sent}, "router weights", 0.5f);
  b.permuted = make(d.activations, {sent, hidden}, "permuted tokens", 1.0f);
  b.slots = make(d.activations, {sent, hidden}, "unpermuted slots", 1.0f);
  b.expert_in = make(d.activations, {recv, hidden}, "expert input", 1.0f);
  b.expert_out = make(d.activations, {recv, hidden}, "expert output", 1.0f);
  b.a2a_send = make(d.dispatch, {sent, hidden}, "all-to-all send", 1.0f);
  b.a2a_recv = make(d.dispatch, {recv, hidden}, "all-to-all receive", 1.0f);
  b.mla_prefill_cache =
      make(d.kv_cache, {x.max_prefill_cache_rows * st.mla_row}, "MLA cache", 1.0f);
  b.mla_decode_cache = make(d.kv_cache, {x.max_decode_cache_rows * st.mla_row}, "MLA cache", 1.0f);
  b.gqa_prefill_cache =
      make(d.kv_cache, {2 * x.max_prefill_cache_rows * st.gqa_row}, "KV cache", 1.0f);
  b.gqa_decode_cache =
      make(d.kv_cache, {2 * x.max_decode_cache_rows * st.gqa_row}, "KV cache", 1.0f);
  b.kda_prefill_state = make(
      DType::kF32, {x.max_prefill_sequences * (st.kda_recurrent + st.kda_conv)}, "KDA state", 0.1f);
  b.kda_decode_state = make(
      DType::kF32, {x.max_decode_sequences * (st.kda_recurrent + st.kda_conv)}, "KDA state", 0.1f);
  return b;
}

LmHead build_lm_head(Backend& backend, const StepTrace& trace, int32_t gpu, int64_t max_rows,
                     DType dtype, uint64_t seed) {
  LmHead h;
  h.vocab = lm_head_vocab(trace, gpu);
  if (h.vocab <= 0) return h;
  const int64_t hidden = trace.model.hidden_size;
  uint64_t id = 1u << 24;
  for (int64_t col = 0; col < h.vocab; col += kLmHeadTileColumns) {
    const int64_t cols = std::min(kLmHeadTileColumns, h.vocab - col);
    h.storage.push_back(backend.allocate(dtype, {hidden, cols}, "output head"));
    backend.fill_synthetic(h.storage.back().view, synthetic_seed(seed, id++),
                           1.0f / std::sqrt(static_cast<float>(hidden)));
    h.tiles.push_back(RouterWeights{h.storage.back().view, Tensor{}});
    h.configs.push_back(RouterConfig{cols, 1, ScoringFunc::kSoftmax, false, 1.0f});
  }
  const int64_t rows = std::max<int64_t>(max_rows, 1);
  h.storage.push_back(backend.allocate(DType::kI32, {rows, 1}, "output head ids"));
  h.ids = h.storage.back().view;
  h.storage.push_back(backend.allocate(DType::kF32, {rows, 1}, "output head probabilities"));
  h.probs = h.storage.back().view;
  return h;
}

ContextStats context_stats(const AttentionBatch& batch) {
  ContextStats c;
  for (int64_t v : batch.context_tokens) {
    c.sum += v;
    c.max = std::max(c.max, v);
  }
  return c;
}

}  // namespace moesim::engine

#include "engine/layer_weights.h"

#include <cmath>
#include <string>

#include "base/check.h"
#include "engine/synthetic.h"

namespace moesim::engine {

namespace {

class Builder {
 public:
  Builder(Backend& backend, LayerWeights& out, int64_t layer_idx, uint64_t root_seed)
      : backend_(backend), out_(out), layer_idx_(layer_idx), root_seed_(root_seed) {}

  // A projection [in, out] (or any tensor whose fan-in is shape[-2]).
  Tensor matrix(DType dtype, const Shape& shape, const char* name) {
    const int64_t fan_in = shape[shape.size() - 2];
    return fill(dtype, shape, name, 1.0f / std::sqrt(static_cast<float>(fan_in)));
  }
  Tensor fill(DType dtype, const Shape& shape, const char* name, float scale) {
    DeviceTensor t =
        backend_.allocate(dtype, shape, "layer " + std::to_string(layer_idx_) + " " + name);
    backend_.fill_synthetic(t.view, synthetic_seed(root_seed_, next_id()), scale);
    return keep(std::move(t));
  }
  // Norm weights: 1 + 0.1 * synthetic.
  Tensor norm(DType dtype, int64_t size, const char* name) {
    std::vector<float> v(size);
    const uint64_t seed = synthetic_seed(root_seed_, next_id());
    for (int64_t i = 0; i < size; ++i) v[i] = 1.0f + 0.1f * synthetic_value(seed, i);
    return keep(upload_floats(backend_, v, dtype, {size},
                              "layer " + std::to_string(layer_idx_) + " " + name));
  }
  Tensor constant(int64_t size, float value, const char* name) {
    return keep(upload_floats(backend_, std::vector<float>(size, value), DType::kF32, {size},
                              "layer " + std::to_string(layer_idx_) + " " + name));
  }
  // A SwiGLU FFN of num_experts experts.
  FfnWeights ffn(DType dtype, int64_t experts, int64_t hidden, int64_t inter, const char* name) {
    FfnWeights w{experts, hidden, inter, {}, {}, {}, {}};
    if (experts == 0) return w;
    if (dtype == DType::kFP8E4M3) {
      w.gate_up = fill(dtype, {experts, hidden, 2 * inter}, name, 256.0f);
      w.down = fill(dtype, {experts, inter, hidden}, name, 256.0f);
      w.gate_up_scale = constant(experts, 1.0f / (256.0f * std::sqrt(float(hidden))), name);
      w.down_scale = constant(experts, 1.0f / (256.0f * std::sqrt(float(inter))), name);
    } else {
      w.gate_up = matrix(dtype, {experts, hidden, 2 * inter}, name);
      w.down = matrix(dtype, {experts, inter, hidden}, name);
    }
    return w;
  }

 private:
  uint64_t next_id() { return static_cast<uint64_t>(layer_idx_) * 256 + tensor_count_++; }
  Tensor keep(DeviceTensor t) {
    out_.allocated_bytes += t.view.size_bytes();
    out_.storage.push_back(std::move(t));
    return out_.storage.back().view;
  }

  Backend& backend_;
  LayerWeights& out_;
  int64_t layer_idx_;
  uint64_t root_seed_;
  uint64_t tensor_count_ = 0;
};

}  // namespace

LayerWeights build_layer_weights(Backend& backend, const TraceLayer& l, int64_t local_experts,
                                 const ReplayDtypes& d, uint64_t root_seed) {
  LayerWeights w;
  Builder b(backend, w, l.layer_idx, root_seed);
  const DType a = d.attention;
  int64_t hidden = 0;
  switch (l.attention_kind) {
    case AttentionKind::kMla: {
      const MlaShape& s = l.mla;
      hidden = s.hidden_size;
      const int64_t qk = s.qk_nope_head_dim + s.qk_rope_head_dim;
      w.mla.shape = s;
      if (s.q_lora_rank > 0) {
        w.mla.w_q_a = b.matrix(a, {hidden, s.q_lora_rank}, "w_q_a");
        w.mla.q_a_norm = b.norm(a, s.q_lora_rank, "q_a_norm");
      }
      w.mla.w_q_b =
          b.matrix(a, {s.q_lora_rank > 0 ? s.q_lora_rank : hidden, s.num_heads * qk}, "w_q_b");
      w.mla.w_kv_a = b.matrix(a, {hidden, s.kv_lora_rank + s.qk_rope_head_dim}, "w_kv_a");
      w.mla.kv_a_norm = b.norm(a, s.kv_lora_rank, "kv_a_norm");
      w.mla.w_kv_b = b.matrix(
          a, {s.kv_lora_rank, s.num_heads * (s.qk_nope_head_dim + s.v_head_dim)}, "w_kv_b");
      w.mla.w_o = b.matrix(a, {s.num_heads * s.v_head_dim, hidden}, "w_o");
      break;
    }
    case AttentionKind::kGqa: {
      const GqaShape& s = l.gqa;
      hidden = s.hidden_size;
      w.gqa.shape = s;
      w.gqa.w_q = b.matrix(a, {hidden, s.num_heads * s.head_dim}, "w_q");
      w.gqa.w_k = b.matrix(a, {hidden, s.num_kv_heads * s.head_dim}, "w_k");
      w.gqa.w_v = b.matrix(a, {hidden, s.num_kv_heads * s.head_dim}, "w_v");
      w.gqa.w_o = b.matrix(a, {s.num_heads * s.head_dim, hidden}, "w_o");
      if (s.qk_norm) {
        w.gqa.q_norm = b.norm(a, s.head_dim, "q_norm");
        w.gqa.k_norm = b.norm(a, s.head_dim, "k_norm");
      }
      break;
    }
    case AttentionKind::kKda: {
      const KdaShape& s = l.kda;
      hidden = s.hidden_size;
      const int64_t hk = s.num_heads * s.head_dim_k;
      const int64_t hv = s.num_heads * s.head_dim_v;
      w.kda.shape = s;
      w.kda.w_q = b.matrix(a, {hidden, hk}, "w_q");
      w.kda.w_k = b.matrix(a, {hidden, hk}, "w_k");
      w.kda.w_v = b.matrix(a, {hidden, hv}, "w_v");
      w.kda.conv_q = b.fill(a, {s.short_conv_kernel, hk}, "conv_q", 0.5f);
      w.kda.conv_k = b.fill(a, {s.short_conv_kernel, hk}, "conv_k", 0.5f);
      w.kda.conv_v = b.fill(a, {s.short_conv_kernel, hv}, "conv_v", 0.5f);
      w.kda.w_f_a = b.matrix(a, {hidden, s.gate_lora_rank}, "w_f_a");
      w.kda.w_f_b = b.matrix(a, {s.gate_lora_rank, hk}, "w_f_b");
      w.kda.w_beta = b.matrix(a, {hidden, s.num_heads}, "w_beta");
      if (s.output_gate) {
        w.kda.w_g_a = b.matrix(a, {hidden, s.gate_lora_rank}, "w_g_a");
        w.kda.w_g_b = b.matrix(a, {s.gate_lora_rank, hv}, "w_g_b");
      }
      w.kda.a_log = b.fill(DType::kF32, {s.num_heads}, "a_log", 1.0f);
      w.kda.dt_bias = b.fill(DType::kF32, {hk}, "dt_bias", 1.0f);
      w.kda.o_norm = b.norm(a, s.head_dim_v, "o_norm");
      w.kda.w_o = b.matrix(a, {hv, hidden}, "w_o");
      break;
    }
  }
  w.attn_norm = b.norm(d.activations, hidden, "attn_norm");
  w.ffn_norm = b.norm(d.activations, hidden, "ffn_norm");
  if (!l.is_moe) {
    w.dense = b.ffn(d.dense_ffn, 1, hidden, l.intermediate_size, "dense_ffn");
  } else {
    w.router.w_gate = b.matrix(d.activations, {hidden, l.num_routed_experts}, "router");
    w.experts = b.ffn(d.experts, local_experts, hidden, l.expert_intermediate_size, "experts");
    if (l.num_shared_experts > 0) {
      w.shared = b.ffn(d.shared_experts, 1, hidden,
                       l.num_shared_experts * l.shared_intermediate_size, "shared_experts");
    }
  }
  MOESIM_CHECK(w.allocated_bytes == layer_weight_bytes(l, local_experts, d),
               "layer weights differ from the memory plan");
  return w;
}

}  // namespace moesim::engine

#include "engine/shape_limits.h"

#include "engine/cuda/kernel_limits.h"

namespace moesim::engine {
namespace {

class Checker {
 public:
  explicit Checker(std::vector<std::string>* out) : out_(out) {}
  void at_most(const std::string& field, int64_t value, int64_t limit) {
    if (value > limit) {
      add(field,
          std::to_string(value) + " exceeds the CUDA kernels' limit of " + std::to_string(limit));
    }
  }
  void multiple_of(const std::string& field, int64_t value, int64_t m,
                   const char* why = "the CUDA kernels' tile") {
    if (value % m != 0) {
      add(field,
          std::to_string(value) + " is not a multiple of " + std::to_string(m) + " (" + why + ")");
    }
  }
  void add(const std::string& field, const std::string& reason) {
    out_->push_back(field + ": " + reason);
  }

 private:
  std::vector<std::string>* out_;
};

}  // namespace

std::vector<std::string> shape_limit_violations(const TraceModel& model, std::string_view backend,
                                                const ReplayDtypes& dtypes) {
  std::vector<std::string> out;
  if (backend != "cuda") return out;
  Checker c(&out);
  if (dtypes.attention == DType::kF32) {
    c.add("model.dtypes.attention", "fp32: the CUDA kernels run BF16 attention weights");
  }
  if (dtypes.kv_cache == DType::kF32) {
    c.add("model.dtypes.kv_cache", "fp32: the CUDA kernels read a BF16 cache");
  }
  const bool fp8_experts = dtypes.experts == DType::kFP8E4M3;
  constexpr const char* kFp8Why = "FP8 expert GEMMs need widths in multiples of 16";
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const TraceLayer& l = model.layers[i];
    const std::string at = "model.layers[" + std::to_string(i) + "].";
    switch (l.attention_kind) {
      case AttentionKind::kMla:
        c.at_most(at + "attention.qk_nope_head_dim + qk_rope_head_dim",
                  l.mla.qk_nope_head_dim + l.mla.qk_rope_head_dim, cuda::kMaxAttentionHeadDim);
        c.at_most(at + "attention.v_head_dim", l.mla.v_head_dim, cuda::kMaxAttentionHeadDim);
        c.at_most(at + "attention.kv_lora_rank", l.mla.kv_lora_rank, cuda::kMaxMlaLoraRank);
        c.multiple_of(at + "attention.kv_lora_rank", l.mla.kv_lora_rank, cuda::kMlaDimMultiple);
        c.at_most(at + "attention.qk_rope_head_dim", l.mla.qk_rope_head_dim, cuda::kMaxMlaRopeDim);
        c.multiple_of(at + "attention.qk_rope_head_dim", l.mla.qk_rope_head_dim,
                      cuda::kMlaDimMultiple);
        break;
      case AttentionKind::kGqa:
        c.at_most(at + "attention.head_dim", l.gqa.head_dim, cuda::kMaxAttentionHeadDim);
        break;
      case AttentionKind::kKda:
        c.at_most(at + "attention.head_dim_k", l.kda.head_dim_k, cuda::kMaxKdaHeadDim);
        c.at_most(at + "attention.head_dim_v", l.kda.head_dim_v, cuda::kMaxKdaHeadDim);
        c.at_most(at + "attention.short_conv_kernel", l.kda.short_conv_kernel,
                  cuda::kMaxShortConvTaps);
        break;
    }
    if (l.is_moe) {
      c.at_most(at + "ffn.num_routed_experts", l.num_routed_experts, cuda::kMaxRoutedExperts);
      c.at_most(at + "ffn.top_k", l.top_k, cuda::kMaxTopK);
      if (fp8_experts) {
        c.multiple_of(at + "ffn.expert_intermediate_size", l.expert_intermediate_size, 16, kFp8Why);
      }
    }
  }
  if (fp8_experts) c.multiple_of("model.hidden_size", model.hidden_size, 16, kFp8Why);
  return out;
}

}  // namespace moesim::engine

// Model cards: the architecture of one MoE (or dense) transformer as a validated plain struct,
// and the quantities derived from it (parameters, weight bytes, KV / latent / recurrent-state
// bytes). A card lists every layer explicitly (attention kind + FFN kind); the TOML form
// describes them compactly and the loader expands them. Cards are parsed once at the edge
// (sim/model/model_card_parser.h) and never modified afterwards. The counting conventions
// (gated FFNs, what total and activated parameters include, 2 FLOPs per multiply-accumulate) are
// in docs/models.md, "Counting conventions".
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moesim::sim {

// Element formats. Block-scaled formats include their scale overhead in bits_per_element.
enum class DType { kFP32, kBF16, kFP16, kFP8, kMXFP8, kMXFP4, kNVFP4 };

// Bits per element including block-scale overhead: FP32 32, BF16/FP16 16, FP8 (E4M3, per-tensor
// scale) 8, MXFP8 8.25 (one E8M0 scale per 32), MXFP4 4.25 (one E8M0 scale per 32), NVFP4 4.5
// (one E4M3 scale per 16; the per-tensor FP32 scale is ignored).
double bits_per_element(DType dtype);
// Lower-case name as written in cards: "fp32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4", "nvfp4".
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> dtype_from_name(std::string_view name);
// Bytes of `num_elements` elements of `dtype` (fractional for sub-byte formats).
double dtype_bytes(DType dtype, double num_elements);

enum class AttentionKind { kMLA, kGQA, kKDA };
// "mla", "gqa", "kda".
std::string_view attention_kind_name(AttentionKind kind);

// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2). The cache holds, per token and layer,
// the compressed KV latent (kv_lora_rank) and the shared rotary key (qk_rope_head_dim).
struct MlaSpec {
  int64_t num_heads = 0;
  int64_t q_lora_rank = 0;  // 0: queries projected directly from the hidden state
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  bool operator==(const MlaSpec&) const = default;
};

// Grouped-query attention; multi-head attention is num_kv_heads == num_heads.
struct GqaSpec {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool qk_norm = false;  // per-head RMSNorm on q and k (Qwen3): 2 * head_dim weights

  bool operator==(const GqaSpec&) const = default;
};

// Kimi Delta Attention (Kimi Linear): a gated delta-rule linear attention. Per head it keeps a
// head_dim_k x head_dim_v recurrent state (constant in context length) plus the last
// short_conv_kernel - 1 inputs of the depthwise short convolutions on q, k and v.
// Weights: q, k (hidden -> heads*dk), v (hidden -> heads*dv), depthwise convs (kernel per
// channel on q, k, v), the channel-wise forget gate as a low-rank projection hidden ->
// gate_lora_rank -> heads*dk, a per-head beta (hidden -> heads), an optional low-rank output
// gate hidden -> gate_lora_rank -> heads*dv, per-head decay and per-channel dt bias
// (heads + heads*dk), an output norm (dv) and the output projection heads*dv -> hidden.
struct KdaSpec {
  int64_t num_heads = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  int64_t short_conv_kernel = 4;  // taps of the depthwise short convolution; >= 1
  int64_t gate_lora_rank = 0;     // rank of the forget/output gate projections; default head_dim_k
  bool output_gate = true;

  bool operator==(const KdaSpec&) const = default;
};

// One layer's token mixer. Only the member matching `kind` is meaningful.
struct AttentionSpec {
  AttentionKind kind = AttentionKind::kMLA;
  MlaSpec mla;
  GqaSpec gqa;
  KdaSpec kda;

  bool operator==(const AttentionSpec&) const = default;
};

enum class ScoringFunc { kSoftmax, kSigmoid };
// "softmax", "sigmoid".
std::string_view scoring_func_name(ScoringFunc f);

// A mixture-of-experts FFN. Experts are gated FFNs. With group-limited routing the router picks
// topk_groups of num_expert_groups groups (num_routed_experts / num_expert_groups experts each)
// and then top_k experts among them; num_expert_groups == 1 is plain top-k.
// latent_dim > 0 models latent-space expert communication: tokens are projected hidden ->
// latent_dim by a shared down-projection before dispatch, experts map latent_dim -> latent_dim,
// and a shared up-projection restores hidden after combine; 0 means experts act on hidden.
struct MoeSpec {
  int64_t num_routed_experts = 0;
  int64_t top_k = 0;
  int64_t num_shared_experts = 0;
  int64_t expert_intermediate_size = 0;
  int64_t shared_intermediate_size = 0;  // per shared expert
  int64_t num_expert_groups = 1;
  int64_t topk_groups = 1;
  ScoringFunc scoring = ScoringFunc::kSoftmax;
  int64_t latent_dim = 0;

  bool operator==(const MoeSpec&) const = default;
};

// One layer's FFN: dense (intermediate_size > 0, moe empty) or MoE.
struct FfnSpec {
  bool is_moe = false;
  int64_t intermediate_size = 0;  // dense only
  MoeSpec moe;                    // MoE only

  bool operator==(const FfnSpec&) const = default;
};

struct LayerSpec {
  AttentionSpec attention;
  FfnSpec ffn;

  bool operator==(const LayerSpec&) const = default;
};

// Weight tensor groups, matching Precision's weight members.
enum class TensorGroup {
  kAttention,
  kDenseFfn,
  kRoutedExperts,
  kSharedExperts,
  kRouter,
  kEmbeddings
};
inline constexpr int kNumTensorGroups = 6;

// How a checkpoint stores one tensor group when that differs from its compute dtype
// (group-quantised integer weights with their scales and zero points, block-scaled FP8 with its
// scale blocks). bits_per_element counts every stored byte (packed values, scales, zero points,
// permutation indices) per weight element; 0 means "as the dtype" (bits_per_element(dtype)).
struct WeightStorage {
  double bits_per_element = 0;
  std::string format;  // e.g. "int4 g32 sym, bf16 scales"; "" when bits_per_element is 0

  bool operator==(const WeightStorage&) const = default;
};

// Storage precision per tensor group. The dtypes are what the cost model computes and streams
// in; `storage` refines the stored bytes of a group (memory, weight bytes) for quantised
// checkpoints imported from HuggingFace. TOML cards leave `storage` empty.
struct Precision {
  DType attention = DType::kBF16;  // attention projections, all RMSNorms
  // Compute dtype of the attention core (QK^T and PV, MLA's absorbed products over the cache):
  // its FLOPs run at this dtype's peak, whatever the projections' weights are (FlashMLA runs
  // BF16 over an FP8-weight model; "fp8" for its sparse FP8 decode). Not a tensor group: no
  // weights.
  DType core_attention = DType::kBF16;
  DType dense_ffn = DType::kBF16;        // dense-layer FFNs
  DType routed_experts = DType::kBF16;   // routed-expert FFNs
  DType shared_experts = DType::kBF16;   // shared experts
  std::optional<DType> router;           // router, score bias, latent projections; unset: as
                                         // shared_experts
  DType embeddings = DType::kBF16;       // input embedding and output head
  DType kv_cache = DType::kBF16;         // KV / MLA latent cache
  DType recurrent_state = DType::kFP32;  // KDA recurrent and short-conv state
  std::array<WeightStorage, kNumTensorGroups> storage = {};  // indexed by TensorGroup

  bool operator==(const Precision&) const = default;
};

struct ModelCard {
  std::string name;
  std::string source_file;  // the file the card was read from ("" when built in code)
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t max_context_tokens = 0;
  bool tie_word_embeddings = false;
  int64_t num_mtp_layers = 0;  // multi-token-prediction modules; not in total_params
  std::vector<LayerSpec> layers;
  Precision precision;

  bool operator==(const ModelCard&) const = default;
};

// Checks a card built in code (the loaders call it): positive sizes, top_k <= experts,
// topk_groups <= groups, groups divide experts, top_k <= experts in the selected groups, ...
// Throws ConfigError naming card.source_file and the offending field.
void validate_model_card(const ModelCard& card);

// ---- Parameters and weight bytes --------------------------------------------------------------

// "attention", "dense_ffn", "routed_experts", "shared_experts", "router", "embeddings".
std::string_view tensor_group_name(TensorGroup g);
// The dtype of a tensor group (kRouter: precision.router, else precision.shared_experts).
DType tensor_group_dtype(const Precision& p, TensorGroup g);
// Stored bits per weight element of a tensor group: p.storage[g].bits_per_element when set,
// else bits_per_element(tensor_group_dtype(p, g)).
double weight_bits_per_element(const Precision& p, TensorGroup g);

// Parameter counts by component. `router` includes the score-correction bias of sigmoid routers
// and the latent projections of latent MoEs; `norms` the two RMSNorms per layer and the final
// norm (attention-internal norms are in `attention`).
struct ParamCounts {
  double embedding = 0;  // input embedding table (vocab x hidden)
  double lm_head = 0;    // output head (0 when tied)
  double attention = 0;
  double dense_ffn = 0;
  double router = 0;
  double routed_experts = 0;
  double shared_experts = 0;
  double norms = 0;
  double total() const;
  // Parameters in one tensor group: router in kRouter, norms in kAttention, embedding and
  // lm_head in kEmbeddings.
  double group(TensorGroup g) const;
};

// All parameters (MTP modules excluded).
ParamCounts total_param_counts(const ModelCard& card);
// Parameters one token passes through (routed experts limited to top_k per layer).
ParamCounts active_param_counts(const ModelCard& card);
double total_params(const ModelCard& card);
// active_param_counts(card).total(): includes the whole input embedding table (Mistral, Qwen).
double active_params(const ModelCard& card);
// Activated parameters without the input embedding table, whose lookup is not a matmul (the
// convention of DeepSeek and Moonshot).
double active_params_excluding_input_embedding(const ModelCard& card);
// Parameters of the MTP modules: each is one copy of the last layer plus two hidden norms and a
// 2*hidden x hidden projection (embedding and head shared with the main model).
double mtp_params(const ModelCard& card);

// Weight bytes of one tensor group: its parameters at weight_bits_per_element.
double weight_bytes(const ModelCard& card, TensorGroup g);
// Sum over tensor groups (MTP excluded).
double total_weight_bytes(const ModelCard& card);

// ---- Per-layer, per-op helpers (parameters, bytes; FLOPs per token: sim/cost/op_formulas.h)
// ---------------------------

// Attention weights of one layer (projections, convs, gates, attention-internal norms).
double attention_params(const AttentionSpec& a, int64_t hidden_size);
// Matrix weights of the attention projections (q/k/v/o, gates, short conv; no norms, no
// per-head scalars).
double attention_projection_params(const AttentionSpec& a, int64_t hidden_size);
// Weights of a gated (SwiGLU) FFN from `in_dim` to `intermediate` and back: 3 matrices.
double gated_ffn_params(int64_t in_dim, int64_t intermediate);
// Weights of a MoE layer's shared experts.
double shared_expert_params(const MoeSpec& m, int64_t hidden_size);
// Parameters of one routed expert.
double expert_params(const MoeSpec& m, int64_t hidden_size);
// Weight bytes of one routed expert at weight_bits_per_element(precision, kRoutedExperts).
double expert_weight_bytes(const ModelCard& card, const MoeSpec& m);
// Bytes per token that cross the network on dispatch (or combine) for one token-expert pair:
// hidden_size (or latent_dim) activations at `activation_dtype`.
double expert_activation_bytes(const MoeSpec& m, int64_t hidden_size, DType activation_dtype);

// ---- Cache and state bytes ---------------------------------------------------------------------

// Cache bytes per token for one layer at precision.kv_cache: MLA (kv_lora_rank +
// qk_rope_head_dim), GQA 2 * num_kv_heads * head_dim; KDA 0 (its state is per sequence).
double kv_bytes_per_token(const AttentionSpec& a, DType kv_dtype);
// Sum over all layers.
double kv_bytes_per_token(const ModelCard& card);
// Recurrent-state bytes of one KDA layer per sequence at precision.recurrent_state:
// heads * dk * dv (state) + (short_conv_kernel - 1) * (2 * heads * dk + heads * dv) (conv).
// 0 for other kinds.
double recurrent_state_bytes_per_sequence(const AttentionSpec& a, DType state_dtype);
// Sum over all layers.
double recurrent_state_bytes_per_sequence(const ModelCard& card);

// Number of layers whose attention has `kind`, and whose FFN is MoE.
int64_t num_layers_of_kind(const ModelCard& card, AttentionKind kind);
int64_t num_moe_layers(const ModelCard& card);

}  // namespace moesim::sim

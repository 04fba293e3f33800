// Where one GPU's HBM goes: computed by one function, one line per section, with the totals
// checked. Memory is accounted, never assumed: a deployment whose weights and workspace do not
// leave room for at least one KV block is refused (ConfigError at the edge).
#pragma once

#include <cstdint>
#include <string>

#include "sim/model/model_card.h"
#include "sim/topology/gpu_spec.h"

namespace moesim::sim {

struct GpuMemoryInputs {
  int64_t hbm_bytes = 0;
  // Routed-expert slots hosted by this GPU, summed over MoE layers (replicas included).
  int64_t routed_expert_slots = 0;
  // Attention tensor-parallel degree (1 = data-parallel attention: full attention weights).
  int32_t attention_tp = 1;
  int64_t kv_block_tokens = 64;
  int64_t workspace_bytes = 0;
  double reserve_fraction = 0.0;  // of HBM kept free (runtime, fragmentation), in [0, 1)
  // Speculative decoding's draft modules (MTP) on this GPU: their weights, and the KV bytes per
  // token their attention adds (0 without speculative decoding; sim/serving/speculative.h).
  double draft_weight_bytes = 0;
  double draft_kv_bytes_per_token = 0;
};

struct GpuMemoryLayout {
  double attention_weight_bytes = 0;      // attention projections and norms (divided by TP)
  double dense_ffn_weight_bytes = 0;      // dense layers' FFNs (replicated on every GPU)
  double shared_expert_weight_bytes = 0;  // shared experts and routers (every GPU)
  double routed_expert_weight_bytes = 0;  // this GPU's expert slots
  double embedding_weight_bytes = 0;      // embedding and head (every GPU)
  double draft_weight_bytes = 0;          // speculative decoding's MTP modules (0 without)
  double workspace_bytes = 0;             // activations, communication buffers
  double reserve_bytes = 0;               // kept free
  double kv_pool_bytes = 0;               // the rest: paged KV / latent blocks and recurrent state
  double kv_bytes_per_token = 0;          // per token on this GPU, all layers (+ MTP modules)
  double state_bytes_per_sequence = 0;    // KDA recurrent state per sequence on this GPU
  double kv_block_bytes = 0;              // kv_block_tokens * kv_bytes_per_token
  int64_t num_kv_blocks = 0;              // floor(kv_pool_bytes / block bytes)
  // Blocks one sequence's recurrent state occupies (ceil(state / block bytes); 0 without KDA).
  int64_t state_blocks_per_sequence = 0;

  double weight_bytes() const {
    return attention_weight_bytes + dense_ffn_weight_bytes + shared_expert_weight_bytes +
           routed_expert_weight_bytes + embedding_weight_bytes + draft_weight_bytes;
  }
};

// KV blocks one sequence of `tokens` tokens holds in blocks of `block_tokens` tokens: its KV /
// latent blocks and its recurrent state's. The one rule admission, the search's diagnosis and
// the pruning study size a sequence by.
inline int64_t blocks_for_sequence(const GpuMemoryLayout& layout, int64_t tokens,
                                   int64_t block_tokens) {
  return (tokens + block_tokens - 1) / block_tokens + layout.state_blocks_per_sequence;
}

// The layout, or an error message (empty on success) when it does not fit.
GpuMemoryLayout compute_gpu_memory_layout(const ModelCard& card, const GpuMemoryInputs& in,
                                          std::string* error);

}  // namespace moesim::sim

#include "sim/memory/memory_layout.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "base/check.h"

namespace moesim::sim {
namespace {

double kv_bytes_per_token_on_gpu(const ModelCard& card, int32_t tp) {
  double bytes = 0;
  for (const LayerSpec& l : card.layers) {
    double b = kv_bytes_per_token(l.attention, card.precision.kv_cache);
    if (l.attention.kind == AttentionKind::kGQA) {
      // K/V heads are split over TP ranks, but never below one head per rank.
      int64_t split = std::min<int64_t>(tp, l.attention.gqa.num_kv_heads);
      b /= static_cast<double>(split);
    }
    // MLA's latent is shared by all heads: every TP rank keeps the whole latent.
    bytes += b;
  }
  return bytes;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// Bytes in the largest binary unit (KiB, MiB or GiB) that keeps the value >= 1.
std::string binary_size(double bytes) {
  if (bytes >= 1024.0 * 1024.0 * 1024.0) return gib(bytes);
  char buf[32];
  if (bytes >= 1024.0 * 1024.0) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f KiB", bytes / 1024.0);
  }
  return buf;
}

}  // namespace

GpuMemoryLayout compute_gpu_memory_layout(const ModelCard& card, const GpuMemoryInputs& in,
                                          std::string* error) {
  GpuMemoryLayout m;
  const double tp = static_cast<double>(in.attention_tp);
  const double hbm = static_cast<double>(in.hbm_bytes);
  // Attention projections and all norms: split over TP ranks.
  m.attention_weight_bytes = weight_bytes(card, TensorGroup::kAttention) / tp;
  // Dense FFN layers: replicated on every GPU of the replica.
  m.dense_ffn_weight_bytes = weight_bytes(card, TensorGroup::kDenseFfn);
  // Shared experts, routers and latent projections: replicated on every GPU.
  m.shared_expert_weight_bytes =
      weight_bytes(card, TensorGroup::kSharedExperts) + weight_bytes(card, TensorGroup::kRouter);
  // Routed experts: only this GPU's slots.
  double per_expert = 0;
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe) {
      per_expert = expert_weight_bytes(card, l.ffn.moe);
      break;
    }
  }
  m.routed_expert_weight_bytes = per_expert * static_cast<double>(in.routed_expert_slots);
  // Embedding and output head: replicated.
  m.embedding_weight_bytes = weight_bytes(card, TensorGroup::kEmbeddings);
  // Speculative decoding's draft modules, as the caller sized them (0 without).
  m.draft_weight_bytes = in.draft_weight_bytes;
  // Activation workspace and communication buffers, as configured.
  m.workspace_bytes = static_cast<double>(in.workspace_bytes);
  // Headroom kept free for the runtime and fragmentation.
  m.reserve_bytes = hbm * in.reserve_fraction;
  // What remains holds KV blocks and recurrent state.
  m.kv_pool_bytes = hbm - m.weight_bytes() - m.workspace_bytes - m.reserve_bytes;

  m.kv_bytes_per_token =
      kv_bytes_per_token_on_gpu(card, in.attention_tp) + in.draft_kv_bytes_per_token;
  m.state_bytes_per_sequence = recurrent_state_bytes_per_sequence(card) / tp;
  // A pure-KDA model has no per-token cache: blocks then hold state only, sized as one
  // token-block of state per kv_block_tokens sequences' worth would be arbitrary; use the
  // state size itself as the block.
  m.kv_block_bytes = m.kv_bytes_per_token > 0
                         ? m.kv_bytes_per_token * static_cast<double>(in.kv_block_tokens)
                         : m.state_bytes_per_sequence;
  if (m.kv_pool_bytes <= 0 || m.kv_block_bytes <= 0 || m.kv_pool_bytes < m.kv_block_bytes) {
    if (error) {
      const std::string sections = "weights " + gib(m.weight_bytes()) + " + workspace " +
                                   gib(m.workspace_bytes) + " + reserve " + gib(m.reserve_bytes);
      if (m.kv_pool_bytes <= 0) {
        *error = "does not fit in HBM: " + sections + " = " + gib(hbm - m.kv_pool_bytes) +
                 " exceed the " + gib(hbm) + " of HBM by " + gib(-m.kv_pool_bytes);
      } else {
        *error = "does not fit in HBM: " + sections + " leave " + gib(m.kv_pool_bytes) + " of " +
                 gib(hbm) + " for the KV cache, less than one KV block (" +
                 binary_size(m.kv_block_bytes) + ")";
      }
    }
    m.num_kv_blocks = 0;
    m.state_blocks_per_sequence = 0;
    return m;
  }
  m.num_kv_blocks = static_cast<int64_t>(std::floor(m.kv_pool_bytes / m.kv_block_bytes));
  m.state_blocks_per_sequence =
      m.state_bytes_per_sequence > 0
          ? static_cast<int64_t>(std::ceil(m.state_bytes_per_sequence / m.kv_block_bytes))
          : 0;
  MOESIM_CHECK(
      m.weight_bytes() + m.workspace_bytes + m.reserve_bytes + m.kv_pool_bytes <= hbm * (1 + 1e-12),
      "memory sections exceed HBM");
  MOESIM_CHECK(static_cast<double>(m.num_kv_blocks) * m.kv_block_bytes <= m.kv_pool_bytes + 1,
               "KV blocks exceed the pool");
  if (error) error->clear();
  return m;
}

}  // namespace moesim::sim

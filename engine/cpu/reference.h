// Reference implementations of the Backend operations on host memory (Tensors whose data are
// host pointers). Semantics, shapes and dtypes are exactly those documented on the matching
// Backend method in engine/backend.h; FP32 internally, outputs rounded once to their dtype.
// GPU tests build host Tensors, call these, and compare.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"

namespace moesim::engine::cpu {

void rmsnorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);

void mla_attention(const MlaWeights& w, const AttentionBatch& batch, MlaForm form, const Tensor& x,
                   const Tensor& latent_cache, const Tensor& out);

void gqa_attention(const GqaWeights& w, const AttentionBatch& batch, const Tensor& x,
                   const Tensor& k_cache, const Tensor& v_cache, const Tensor& out);

void kda_attention(const KdaWeights& w, const AttentionBatch& batch, const Tensor& x,
                   const KdaState& state, const Tensor& out);

// One step of the gated delta rule for one head, in place on the row-major dk x dv state:
// S <- (I - beta k k^T) Diag(alpha) S + beta k v^T, then o = S^T q (o has dv entries).
void kda_recurrence_step(int64_t dk, int64_t dv, const float* q, const float* k, const float* v,
                         const float* alpha, float beta, float* state, float* o);

void router(const Tensor& x, const RouterWeights& w, const RouterConfig& config,
            const Tensor& expert_ids, const Tensor& expert_weights);

void permute(const Tensor& x, const Tensor& gather_rows, const Tensor& out);

void unpermute(const Tensor& x, const Tensor& scatter_rows, const Tensor& out);

void expert_ffn(const Tensor& x, const std::vector<int64_t>& tokens_per_expert, const FfnWeights& w,
                const Tensor& out);

void weighted_combine(const Tensor& expert_out, const Tensor& weights, const Tensor& shared_out,
                      const Tensor& out);

// Rotates one vector of `dim` rotary elements in place for position `pos` (half-split form,
// base 10000; see engine/backend.h).
void apply_rope(float* v, int64_t dim, int64_t pos);

}  // namespace moesim::engine::cpu

// Internal to engine/cpu: the pieces attention kernels share.
#pragma once

#include <cstdint>

#include "engine/cpu/host_matrix.h"

namespace moesim::engine::cpu {

// Softmax attention of one head over one sequence: q [n, d], k [m, d], v [m, dv] with
// m = context + n; query i attends to keys [0, context + i]. Returns [n, dv] in FP32.
MatF attend_causal(const MatF& q, const MatF& k, const MatF& v, float scale, int64_t context);

// RMSNorm of every row of m in place with weight w (size m.cols()).
void rmsnorm_rows(MatF& m, const VecF& w, float eps);

// RMSNorm epsilon of the norms inside attention blocks (q_a, kv_a, qk, KDA output norm).
inline constexpr float kInnerNormEps = 1e-6f;

}  // namespace moesim::engine::cpu

// Shapes the CUDA kernels can run. The kernels size their registers and shared memory by these
// bounds, and a replay on the cuda backend refuses a trace outside them before it allocates
// anything (engine/shape_limits.h), instead of failing at the first launch. Plain C++: included
// by the kernels and by host code built without nvcc.
#pragma once

namespace moesim::engine::cuda {

inline constexpr int kMaxAttentionHeadDim = 256;  // GQA / MHA head_dim, MLA prefill nope+rope and v
inline constexpr int kMaxKdaHeadDim = 128;        // KDA head_dim_k and head_dim_v
inline constexpr int kMaxShortConvTaps = 16;      // KDA short_conv_kernel
inline constexpr int kMaxMlaLoraRank = 512;       // MLA decode kv_lora_rank, a multiple of 16
inline constexpr int kMaxMlaRopeDim = 128;        // MLA decode qk_rope_head_dim, a multiple of 16
inline constexpr int kMlaDimMultiple = 16;
inline constexpr int kMaxRoutedExperts = 1024;  // router: 32 experts per lane, one mask each
inline constexpr int kMaxTopK = 32;

}  // namespace moesim::engine::cuda

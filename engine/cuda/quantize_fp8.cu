// Per-tensor FP8 E4M3 quantisation: a grid-stride max(|x|) reduced with an integer atomicMax on
// the float bits (non-negative floats order like their bit patterns, and max is order-free, so
// the result is deterministic), then a second pass that divides by the scale and converts with
// round-to-nearest-even and saturation to +-448.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "engine/cuda/check.h"
#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;
constexpr float kFp8Max = 448.0f;

__global__ void absmax_kernel(const bf16* __restrict__ x, int64_t num_elements, float* absmax) {
  float local = 0.0f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < num_elements;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    local = fmaxf(local, fabsf(__bfloat162float(x[i])));
  }
  local = warp_max(local);
  if (threadIdx.x % kWarpSize == 0) {
    atomicMax(reinterpret_cast<int*>(absmax), __float_as_int(local));
  }
}

__global__ void quantize_kernel(const bf16* __restrict__ x, int64_t num_elements,
                                const float* __restrict__ absmax, fp8e4m3* __restrict__ out,
                                float* __restrict__ scale) {
  const float amax = *absmax;
  const float s = amax > 0.0f ? amax / kFp8Max : 1.0f;
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = s;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < num_elements;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i].__x = __nv_cvt_float_to_fp8(__bfloat162float(x[i]) / s, __NV_SATFINITE, __NV_E4M3);
  }
}

}  // namespace

void launch_quantize_fp8_per_tensor(const bf16* x, int64_t num_elements, fp8e4m3* out, float* scale,
                                    float* absmax_scratch, cudaStream_t stream) {
  if (num_elements == 0) return;
  const auto num_blocks =
      static_cast<unsigned>(std::min<int64_t>(ceil_div(num_elements, kThreads), kMaxBlocks));
  MOESIM_CUDA_CHECK(cudaMemsetAsync(absmax_scratch, 0, sizeof(float), stream));
  absmax_kernel<<<num_blocks, kThreads, 0, stream>>>(x, num_elements, absmax_scratch);
  MOESIM_CUDA_CHECK_LAUNCH();
  quantize_kernel<<<num_blocks, kThreads, 0, stream>>>(x, num_elements, absmax_scratch, out, scale);
  MOESIM_CUDA_CHECK_LAUNCH();
}

}  // namespace moesim::engine::cuda

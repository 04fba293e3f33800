// SwiGLU activation: element-wise over [rows, intermediate], one thread per output element.
#include <cuda_bf16.h>

#include <algorithm>

#include "engine/cuda/check.h"
#include "engine/cuda/device_utils.cuh"
#include "engine/cuda/launchers.h"

namespace moesim::engine::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void swiglu_kernel(const bf16* __restrict__ gate_up, bf16* __restrict__ out,
                              int64_t num_elements, int intermediate_size) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       idx < num_elements; idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = idx / intermediate_size;
    const int64_t col = idx % intermediate_size;
    const bf16* in_row = gate_up + row * 2 * intermediate_size;
    const float gate = __bfloat162float(in_row[col]);
    const float up = __bfloat162float(in_row[intermediate_size + col]);
    const float silu = gate / (1.0f + expf(-gate));
    out[idx] = __float2bfloat16(silu * up);
  }
}

}  // namespace

void launch_swiglu(const bf16* gate_up, bf16* out, int64_t num_rows, int intermediate_size,
                   cudaStream_t stream) {
  if (num_rows == 0) return;
  MOESIM_CUDA_REQUIRE(intermediate_size > 0, "intermediate_size must be positive");
  const int64_t num_elements = num_rows * intermediate_size;
  const int64_t num_blocks = std::min<int64_t>(ceil_div(num_elements, kThreads), 65536);
  swiglu_kernel<<<static_cast<unsigned>(num_blocks), kThreads, 0, stream>>>(
      gate_up, out, num_elements, intermediate_size);
  MOESIM_CUDA_CHECK_LAUNCH();
}

}  // namespace moesim::engine::cuda

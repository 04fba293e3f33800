// The CUDA backend ("cuda" in the engine's registry): device buffers, the kernels of
// engine/cuda/launchers.h, cuBLAS / cuBLASLt GEMMs and the NCCL all-to-all, timed with CUDA
// events. Everything runs on one stream of device 0 (or DistributedConfig::local_device_idx
// after init_distributed). Device and library failures throw CudaError (engine/cuda/check.h);
// allocation failure throws OutOfMemoryError with the bytes requested and free.
#pragma once

#include <memory>

#include "engine/backend.h"

namespace moesim::engine::cuda {

// A fresh CUDA backend on device 0. Throws BackendUnavailableError when no usable device exists
// (cudaGetDeviceCount reports no device, or no driver).
std::unique_ptr<Backend> make_cuda_backend();

// True when at least one CUDA device is usable (no driver or no device: false). Never throws.
bool cuda_device_available();

}  // namespace moesim::engine::cuda

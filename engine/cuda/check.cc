#include "engine/cuda/check.h"

#include <string>

namespace moesim::engine::cuda {

void check_cuda(cudaError_t result, const char* call, const char* file, int line) {
  if (result == cudaSuccess) return;
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                      cudaGetErrorName(result) + " (" + cudaGetErrorString(result) + ")",
                  result == cudaErrorMemoryAllocation);
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                      cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")",
                  status == CUBLAS_STATUS_ALLOC_FAILED);
}

void throw_invalid(const std::string& message, const char* file, int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + message, false);
}

}  // namespace moesim::engine::cuda

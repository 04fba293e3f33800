// Check macros for every CUDA runtime, cuBLAS / cuBLASLt and NCCL call (STYLE principle 16).
//
// A failing call throws CudaError whose message names file:line, the call as written and the
// library's error name, e.g.
//   "engine/cuda/rmsnorm.cu:42: cudaMemcpy(...) failed: cudaErrorInvalidValue (invalid argument)".
// Library code never calls exit(), and nothing in the backend catches CudaError: it propagates
// out of the Backend call to the caller (the NCCL all-to-all only closes its open group first,
// engine/cuda/nccl_communicator.cc). moesim-engine's main catches it as a std::exception, prints
// "moesim-engine: error: <message>" and exits 1 (MPI_Abort first under mpirun, so the other ranks
// do not wait in a collective). Allocation failures of cudaMalloc / cudaMallocAsync are not
// CudaErrors: the backend's allocators throw OutOfMemoryError.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace moesim::engine::cuda {

// A device or library failure: message as described above; `is_out_of_memory()` is true for
// cudaErrorMemoryAllocation and CUBLAS_STATUS_ALLOC_FAILED.
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& message, bool is_out_of_memory)
      : std::runtime_error(message), is_out_of_memory_(is_out_of_memory) {}
  bool is_out_of_memory() const { return is_out_of_memory_; }

 private:
  bool is_out_of_memory_;
};

// Throws CudaError when `result` is not cudaSuccess.
void check_cuda(cudaError_t result, const char* call, const char* file, int line);
// Throws CudaError when `status` is not CUBLAS_STATUS_SUCCESS (cuBLAS and cuBLASLt).
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);
// Throws CudaError with `message` (a violated precondition of a launcher, e.g. unsupported
// shape), prefixed by file:line.
[[noreturn]] void throw_invalid(const std::string& message, const char* file, int line);

}  // namespace moesim::engine::cuda

#define MOESIM_CUDA_CHECK(call) \
  ::moesim::engine::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define MOESIM_CUBLAS_CHECK(call) \
  ::moesim::engine::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// Checks the launch of the kernel just enqueued (configuration errors surface here; faults
// inside the kernel surface at the next synchronising call).
#define MOESIM_CUDA_CHECK_LAUNCH() MOESIM_CUDA_CHECK(cudaGetLastError())
// Precondition of a launcher: throws CudaError naming the condition when it does not hold.
#define MOESIM_CUDA_REQUIRE(condition, message)                                                   \
  do {                                                                                            \
    if (!(condition)) {                                                                           \
      ::moesim::engine::cuda::throw_invalid(                                                      \
          std::string("precondition `" #condition "` failed: ") + (message), __FILE__, __LINE__); \
    }                                                                                             \
  } while (0)

// NCCL communicator of the CUDA backend and the row all-to-all of MoE dispatch / combine.
//
// Bootstrap by a shared file (rank 0 writes the unique id atomically, the others poll for it) or,
// when built with MPI, by MPI_Bcast. The all-to-all is grouped point-to-point (one ncclSend and
// one ncclRecv per peer with rows), so per-peer counts may differ under skewed routing. It
// implements the engine's Communicator interface (engine/communicator.h), as the CPU backend's
// in-process group does. docs/cuda.md ("NCCL all-to-all and bootstrap").
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/communicator.h"

namespace moesim::engine::cuda {

// Throws CudaError when `result` is not ncclSuccess (message: file:line, call, error name and
// NCCL's last error string).
void check_nccl(ncclResult_t result, const char* call, const char* file, int line);

class NcclCommunicator : public Communicator {
 public:
  // Shared-file bootstrap (see above). The current CUDA device must be set by the caller.
  static std::unique_ptr<NcclCommunicator> create_with_file(const std::string& path, int rank,
                                                            int world_size, double timeout_s);
#if defined(MOESIM_HAVE_MPI)
  // MPI bootstrap: rank and world size from MPI_COMM_WORLD.
  static std::unique_ptr<NcclCommunicator> create_with_mpi();
#endif
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  // The stream the Communicator-interface all_to_all_bytes enqueues on.
  void set_stream(cudaStream_t stream) { stream_ = stream; }
  // Communicator interface: all_to_all_bytes(..., stream) below on the set_stream stream.
  void all_to_all_bytes(const void* send, const std::vector<int64_t>& send_bytes_per_rank,
                        void* recv, const std::vector<int64_t>& recv_bytes_per_rank) override {
    all_to_all_bytes(send, send_bytes_per_rank, recv, recv_bytes_per_rank, stream_);
  }

  // Sends send_bytes_per_rank[r] bytes starting at send + send offset of r (prefix sum) to rank
  // r and receives recv_bytes_per_rank[r] bytes into recv at its prefix-sum offset, on `stream`.
  void all_to_all_bytes(const void* send, const std::vector<int64_t>& send_bytes_per_rank,
                        void* recv, const std::vector<int64_t>& recv_bytes_per_rank,
                        cudaStream_t stream);

 private:
  NcclCommunicator(ncclComm_t comm, int rank, int world_size)
      : comm_(comm), rank_(rank), world_size_(world_size) {}
  static std::unique_ptr<NcclCommunicator> init(const ncclUniqueId& id, int rank, int world_size);

  ncclComm_t comm_;
  int rank_;
  int world_size_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace moesim::engine::cuda

#define MOESIM_NCCL_CHECK(call) \
  ::moesim::engine::cuda::check_nccl((call), #call, __FILE__, __LINE__)

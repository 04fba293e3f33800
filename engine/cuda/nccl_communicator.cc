#include "engine/cuda/nccl_communicator.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/cuda/check.h"

#if defined(MOESIM_HAVE_MPI)
#include <mpi.h>
#endif

namespace moesim::engine::cuda {
namespace {

const char* nccl_result_name(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclUnknownResult";
  }
}

}  // namespace

void check_nccl(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess) return;
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + call +
                      " failed: " + nccl_result_name(result) + " (" + ncclGetErrorString(result) +
                      "; " + ncclGetLastError(nullptr) + ")",
                  false);
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::init(const ncclUniqueId& id, int rank,
                                                         int world_size) {
  ncclComm_t comm = nullptr;
  MOESIM_NCCL_CHECK(ncclCommInitRank(&comm, world_size, id, rank));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(comm, rank, world_size));
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create_with_file(const std::string& path,
                                                                     int rank, int world_size,
                                                                     double timeout_s) {
  MOESIM_CUDA_REQUIRE(world_size >= 1 && rank >= 0 && rank < world_size,
                      "rank must be in [0, world_size)");
  ncclUniqueId id;
  if (rank == 0) {
    MOESIM_NCCL_CHECK(ncclGetUniqueId(&id));
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(id.internal, sizeof(id.internal));
      MOESIM_CUDA_REQUIRE(static_cast<bool>(out), "cannot write NCCL unique id file " + tmp);
    }
    std::error_code error;
    std::filesystem::rename(tmp, path, error);
    MOESIM_CUDA_REQUIRE(!error, "cannot rename " + tmp + " to " + path + ": " + error.message());
  } else {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_s));
    while (true) {
      std::ifstream in(path, std::ios::binary);
      if (in && in.read(id.internal, sizeof(id.internal))) break;
      MOESIM_CUDA_REQUIRE(std::chrono::steady_clock::now() < deadline,
                          "timed out after " + std::to_string(timeout_s) +
                              " s waiting for NCCL unique id file " + path);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return init(id, rank, world_size);
}

#if defined(MOESIM_HAVE_MPI)
std::unique_ptr<NcclCommunicator> NcclCommunicator::create_with_mpi() {
  int rank = 0;
  int world_size = 1;
  MOESIM_CUDA_REQUIRE(MPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS, "MPI_Comm_rank");
  MOESIM_CUDA_REQUIRE(MPI_Comm_size(MPI_COMM_WORLD, &world_size) == MPI_SUCCESS, "MPI_Comm_size");
  ncclUniqueId id;
  if (rank == 0) MOESIM_NCCL_CHECK(ncclGetUniqueId(&id));
  MOESIM_CUDA_REQUIRE(
      MPI_Bcast(id.internal, sizeof(id.internal), MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS,
      "MPI_Bcast of the NCCL unique id");
  return init(id, rank, world_size);
}
#endif

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) ncclCommDestroy(comm_);  // destructor: failure cannot be reported
}

void NcclCommunicator::all_to_all_bytes(const void* send,
                                        const std::vector<int64_t>& send_bytes_per_rank, void* recv,
                                        const std::vector<int64_t>& recv_bytes_per_rank,
                                        cudaStream_t stream) {
  MOESIM_CUDA_REQUIRE(static_cast<int>(send_bytes_per_rank.size()) == world_size_ &&
                          static_cast<int>(recv_bytes_per_rank.size()) == world_size_,
                      "one count per rank");
  const auto* send_bytes = static_cast<const char*>(send);
  auto* recv_bytes = static_cast<char*>(recv);
  int64_t send_offset = 0;
  int64_t recv_offset = 0;
  MOESIM_NCCL_CHECK(ncclGroupStart());
  try {
    for (int peer = 0; peer < world_size_; ++peer) {
      const int64_t s = send_bytes_per_rank[peer];
      const int64_t r = recv_bytes_per_rank[peer];
      if (s > 0) {
        MOESIM_NCCL_CHECK(ncclSend(send_bytes + send_offset, static_cast<size_t>(s), ncclUint8,
                                   peer, comm_, stream));
      }
      if (r > 0) {
        MOESIM_NCCL_CHECK(ncclRecv(recv_bytes + recv_offset, static_cast<size_t>(r), ncclUint8,
                                   peer, comm_, stream));
      }
      send_offset += s;
      recv_offset += r;
    }
  } catch (...) {
    ncclGroupEnd();  // close the group so that later NCCL calls are not swallowed by it
    throw;
  }
  MOESIM_NCCL_CHECK(ncclGroupEnd());
}

}  // namespace moesim::engine::cuda

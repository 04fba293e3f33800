// MPI for multi-process replays (`mpirun -np N moesim-engine replay ...`), compiled in when CMake
// finds MPI (MOESIM_HAVE_MPI); every function here is safe to call in a build without it.
//   - MpiSession: initialises MPI for the replay and finalises it on a normal exit. On an
//     exception it leaves MPI running so that abort_mpi_job() can stop the other ranks, which
//     would otherwise wait forever in the next collective.
//   - make_mpi_communicator(): the CPU backend's Communicator over MPI_COMM_WORLD (one process
//     per rank, MPI_Alltoallv on host memory). The CUDA backend bootstraps NCCL through MPI
//     instead (engine/cuda/nccl_communicator.h) and exchanges its bytes with NCCL.
#pragma once

#include <memory>

#include "engine/communicator.h"

namespace moesim::engine {

// Whether this build has MPI.
bool have_mpi();

class MpiSession {
 public:
  // Initialises MPI when `needed` and it is not initialised yet.
  explicit MpiSession(bool needed);
  // MPI_Finalize if this session initialised MPI, unless an exception is unwinding the stack.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owned_ = false;
};

// A communicator over MPI_COMM_WORLD (MPI initialised); throws BackendUnavailableError in a build
// without MPI. all_to_all_bytes() refuses (InputError-free std::runtime_error naming the count)
// a per-rank or total byte count above INT_MAX, MPI_Alltoallv's limit.
std::shared_ptr<Communicator> make_mpi_communicator();

// When MPI is initialised and not finalised: MPI_Abort(MPI_COMM_WORLD, exit_code), which ends
// every rank of the job (mpirun exits non-zero). Otherwise nothing. Call after printing the error.
void abort_mpi_job(int exit_code);

}  // namespace moesim::engine

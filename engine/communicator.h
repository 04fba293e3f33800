// A group of ranks that exchange bytes: what Backend::all_to_all runs on when the replay plays
// several simulated GPUs at once (one rank each). Implementations:
//   - NCCL (engine/cuda/nccl_communicator.h): one process and one GPU per rank, bootstrapped
//     through a shared file or MPI;
//   - in-process threads (engine/cpu/thread_communicator.h): one thread per rank, exchanging
//     through shared memory, so the multi-rank replay runs and is tested on a CPU.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace moesim::engine {

// Another rank of an in-process group failed, so a collective cannot complete. Thrown by the
// waiting ranks so that they unwind instead of blocking forever; the failing rank reports the
// real error.
class CommunicatorAbortedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This rank in [0, world_size()).
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Collective byte all-to-all: sends send_bytes_per_rank[r] bytes, starting at `send` plus the
  // sum of send_bytes_per_rank[0..r), to rank r, and receives recv_bytes_per_rank[r] bytes from
  // rank r at `recv` plus the sum of recv_bytes_per_rank[0..r). Both vectors have world_size()
  // entries (zeros allowed, including to and from itself). Every rank of the group calls it the
  // same number of times in the same order, and the counts agree pairwise (what r sends to s is
  // what s receives from r). The buffers live in the backend's memory (host for the CPU, device
  // for CUDA); for a device backend the exchange may still be in flight on return (it is
  // ordered on the backend's stream).
  virtual void all_to_all_bytes(const void* send, const std::vector<int64_t>& send_bytes_per_rank,
                                void* recv, const std::vector<int64_t>& recv_bytes_per_rank) = 0;
};

}  // namespace moesim::engine

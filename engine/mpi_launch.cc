#include "engine/mpi_launch.h"

#include <climits>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend.h"

#if defined(MOESIM_HAVE_MPI)
#include <mpi.h>
#endif

namespace moesim::engine {

#if defined(MOESIM_HAVE_MPI)

namespace {

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

void require(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(call) + " failed: " + std::string(text, len));
}

// MPI counts and displacements are int: converts per-rank byte counts and their offsets.
void to_int_counts(const std::vector<int64_t>& bytes, const char* what, std::vector<int>& counts,
                   std::vector<int>& offsets) {
  counts.resize(bytes.size());
  offsets.resize(bytes.size());
  int64_t offset = 0;
  for (size_t r = 0; r < bytes.size(); ++r) {
    if (bytes[r] < 0 || bytes[r] > INT_MAX || offset > INT_MAX) {
      throw std::runtime_error(
          "MPI all-to-all: " + std::string(what) + " " + std::to_string(bytes[r]) +
          " bytes at offset " + std::to_string(offset) + " for rank " + std::to_string(r) +
          " exceed MPI_Alltoallv's int range (" + std::to_string(INT_MAX) + ")");
    }
    counts[r] = static_cast<int>(bytes[r]);
    offsets[r] = static_cast<int>(offset);
    offset += bytes[r];
  }
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    require(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    require(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    require(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  ~MpiCommunicator() override {
    if (mpi_running()) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

  void all_to_all_bytes(const void* send, const std::vector<int64_t>& send_bytes_per_rank,
                        void* recv, const std::vector<int64_t>& recv_bytes_per_rank) override {
    if (static_cast<int>(send_bytes_per_rank.size()) != size_ ||
        static_cast<int>(recv_bytes_per_rank.size()) != size_) {
      throw std::runtime_error("MPI all-to-all: per-rank counts must have world_size entries");
    }
    to_int_counts(send_bytes_per_rank, "send", send_counts_, send_offsets_);
    to_int_counts(recv_bytes_per_rank, "receive", recv_counts_, recv_offsets_);
    require(MPI_Alltoallv(send, send_counts_.data(), send_offsets_.data(), MPI_BYTE, recv,
                          recv_counts_.data(), recv_offsets_.data(), MPI_BYTE, comm_),
            "MPI_Alltoallv");
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> send_counts_, send_offsets_, recv_counts_, recv_offsets_;
};

}  // namespace

bool have_mpi() { return true; }

MpiSession::MpiSession(bool needed) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (needed && initialized == 0) {
    require(MPI_Init(nullptr, nullptr), "MPI_Init");
    // Errors come back as return codes (require() turns them into exceptions).
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    owned_ = true;
  }
}

MpiSession::~MpiSession() {
  if (owned_ && std::uncaught_exceptions() == 0 && mpi_running()) MPI_Finalize();
}

std::shared_ptr<Communicator> make_mpi_communicator() {
  return std::make_shared<MpiCommunicator>();
}

void abort_mpi_job(int exit_code) {
  if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

#else  // no MPI in this build

bool have_mpi() { return false; }

MpiSession::MpiSession(bool /*needed*/) {}

MpiSession::~MpiSession() = default;

std::shared_ptr<Communicator> make_mpi_communicator() {
  throw BackendUnavailableError(
      "this moesim-engine was built without MPI (MPI was not found at configure time)");
}

void abort_mpi_job(int /*exit_code*/) {}

#endif

}  // namespace moesim::engine

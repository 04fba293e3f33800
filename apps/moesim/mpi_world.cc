#include "apps/moesim/mpi_world.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "apps/moesim/cli.h"

#ifdef MOESIM_HAVE_MPI
#include <mpi.h>
#endif

namespace moesim::cli {

int32_t mpi_launch_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (v == nullptr) continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n >= 1 && n <= (1 << 20)) return static_cast<int32_t>(n);
  }
  return 1;
}

#ifdef MOESIM_HAVE_MPI

MpiWorld::MpiWorld() {
  if (mpi_launch_size() <= 1) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(nullptr, nullptr);
    started_ = true;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rank_ = rank;
  size_ = size;
}

MpiWorld::~MpiWorld() {
  if (started_) MPI_Finalize();
}

std::vector<std::string> MpiWorld::gather_to_root(const std::string& text) const {
  if (!active()) return {text};
  const auto length = static_cast<long long>(text.size());
  std::vector<long long> lengths(rank_ == 0 ? size_ : 0);
  MPI_Gather(&length, 1, MPI_LONG_LONG, lengths.data(), 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  // Texts travel in chunks of at most 1 GiB (MPI counts are int).
  constexpr long long kChunk = 1LL << 30;
  std::vector<std::string> out;
  if (rank_ == 0) {
    out.resize(static_cast<size_t>(size_));
    out[0] = text;
    for (int32_t r = 1; r < size_; ++r) {
      out[r].resize(static_cast<size_t>(lengths[r]));
      for (long long at = 0; at < lengths[r]; at += kChunk) {
        const int n = static_cast<int>(std::min(kChunk, lengths[r] - at));
        MPI_Recv(out[r].data() + at, n, MPI_CHAR, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    }
  } else {
    for (long long at = 0; at < length; at += kChunk) {
      const int n = static_cast<int>(std::min(kChunk, length - at));
      MPI_Send(text.data() + at, n, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    }
  }
  return out;
}

int64_t MpiWorld::sum(int64_t value) const {
  if (!active()) return value;
  long long in = value, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

int64_t MpiWorld::max(int64_t value) const {
  if (!active()) return value;
  long long in = value, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

void MpiWorld::abort(int exit_code) const {
  if (active()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

#else  // no MPI

MpiWorld::MpiWorld() {
  if (mpi_launch_size() > 1) {
    throw UsageError{
        "launched by mpirun with " + std::to_string(mpi_launch_size()) +
        " processes, but this moesim was built without MPI (MPI was not found at configure "
        "time): run one process, or split the sweep with --shard K/N and `moesim sweep merge`"};
  }
}

MpiWorld::~MpiWorld() = default;

std::vector<std::string> MpiWorld::gather_to_root(const std::string& text) const { return {text}; }
int64_t MpiWorld::sum(int64_t value) const { return value; }
int64_t MpiWorld::max(int64_t value) const { return value; }
void MpiWorld::abort(int exit_code) const { std::exit(exit_code); }

#endif

}  // namespace moesim::cli

// How a `moesim-engine replay` run maps onto ranks, decided once from the command line and the
// launcher's environment, before any backend exists. Three modes:
//   kSingle        one rank plays the chosen simulated GPUs in turn (--gpus/--ranks); the
//                  all-to-alls are not measured.
//   kThreads       --backend cpu --nranks N: N ranks as threads of this process, joined by an
//                  in-process communicator (engine/cpu/thread_communicator.h).
//   kProcessPerRank one process per rank, each with one device (NCCL): --rank R --nranks N
//                  (+ --nccl-id-file PATH), or launched by mpirun, whose environment
//                  (OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK, or PMI_RANK/PMI_SIZE with
//                  MPI_LOCALRANKID) gives rank, size and local rank.
// Every inconsistency is an InputError naming the flags or variables involved.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "engine/backend.h"

namespace moesim::engine {

// The launcher's view of this process, from the environment.
struct LauncherRank {
  int rank = 0;
  int world_size = 1;
  std::optional<int> local_rank;
  std::string source;  // the variables read, e.g. "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"
};

// Reads OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK} (Open MPI), else PMI_RANK/PMI_SIZE with
// MPI_LOCALRANKID (MPICH, Intel MPI); nullopt when neither pair is set. `getenv` is injected for
// tests (std::getenv in the program). Throws InputError for a value that is not an integer, a
// size < 1 or a rank outside [0, size).
std::optional<LauncherRank> launcher_rank_from_env(
    const std::function<const char*(const char*)>& getenv);

// The rank-related command-line values (nullopt / empty: not given).
struct RankFlags {
  std::string backend = "cpu";
  std::optional<int64_t> rank;          // --rank
  std::optional<int64_t> nranks;        // --nranks
  std::optional<int64_t> local_device;  // --local-device
  std::string nccl_id_file;             // --nccl-id-file
  bool gpus_given = false;              // --gpus or --ranks
  bool replica_given = false;           // --replica
};

enum class RankMode { kSingle, kThreads, kProcessPerRank };

struct RankPlan {
  RankMode mode = RankMode::kSingle;
  // kProcessPerRank: this process's rank, world size, device, id file, bootstrap timeout.
  // kThreads: world_size only (ranks 0..N-1 are filled in per thread). kSingle: defaults.
  DistributedConfig config;
  bool use_mpi_bootstrap = false;  // kProcessPerRank under MPI with no --nccl-id-file
  std::string launcher;            // LauncherRank::source, or "" when from flags only
};

// Combines flags and environment. Rules: --rank needs --nranks (or an MPI launch); rank in
// [0, nranks); flags that disagree with the launcher's environment are refused; --backend cpu
// runs several ranks as threads (--nranks without --rank), or, under an MPI launch with size > 1
// and `have_mpi_bootstrap`, one process per rank exchanging through MPI (no --nccl-id-file, no
// --local-device); other backends run one process per rank and need --nccl-id-file unless
// `have_mpi_bootstrap`; --gpus/--ranks belong to single-rank runs and --replica to multi-rank
// runs. --local-device defaults to the launcher's local rank, else the rank.
RankPlan plan_ranks(const RankFlags& flags, const std::optional<LauncherRank>& launcher,
                    bool have_mpi_bootstrap);

// --out for this process: "{rank}" in `path` is replaced by the rank. A process-per-rank run
// with several ranks must use it (InputError otherwise: the processes would overwrite one file).
std::string rank_output_path(const std::string& path, const RankPlan& plan);

}  // namespace moesim::engine

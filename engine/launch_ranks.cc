#include "engine/launch_ranks.h"

#include <string>

#include "engine/input_error.h"

namespace moesim::engine {
namespace {

std::optional<int64_t> env_int(const std::function<const char*(const char*)>& getenv,
                               const char* name) {
  const char* value = getenv(name);
  if (value == nullptr) return std::nullopt;
  const std::string text = value;
  size_t used = 0;
  int64_t x = -1;
  try {
    x = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || x < 0) {
    throw InputError(std::string("environment variable ") + name + "='" + text +
                     "': expected an integer >= 0");
  }
  return x;
}

std::optional<LauncherRank> from_pair(const std::function<const char*(const char*)>& getenv,
                                      const char* rank_var, const char* size_var,
                                      const char* local_var) {
  const std::optional<int64_t> rank = env_int(getenv, rank_var);
  const std::optional<int64_t> size = env_int(getenv, size_var);
  if (!rank && !size) return std::nullopt;
  const std::string source = std::string(rank_var) + "/" + size_var;
  if (!rank || !size) {
    throw InputError("launcher environment: " + source + ": both must be set, found only " +
                     (rank ? rank_var : size_var));
  }
  if (*size < 1 || *rank >= *size) {
    throw InputError("launcher environment: " + source + " = " + std::to_string(*rank) + "/" +
                     std::to_string(*size) + ": the rank must be in [0, size)");
  }
  LauncherRank l;
  l.rank = static_cast<int>(*rank);
  l.world_size = static_cast<int>(*size);
  if (const std::optional<int64_t> local = env_int(getenv, local_var)) {
    l.local_rank = static_cast<int>(*local);
  }
  l.source = source;
  return l;
}

}  // namespace

std::optional<LauncherRank> launcher_rank_from_env(
    const std::function<const char*(const char*)>& getenv) {
  if (auto l = from_pair(getenv, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK")) {
    return l;
  }
  return from_pair(getenv, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID");
}

RankPlan plan_ranks(const RankFlags& flags, const std::optional<LauncherRank>& launcher,
                    bool have_mpi_bootstrap) {
  // Launched by mpirun with several processes: the environment is authoritative.
  const bool mpi_launch = launcher.has_value() && launcher->world_size > 1;
  if (mpi_launch && flags.nranks && *flags.nranks != launcher->world_size) {
    throw InputError("--nranks " + std::to_string(*flags.nranks) +
                     " disagrees with the launcher (" + launcher->source + " says " +
                     std::to_string(launcher->world_size) + " ranks)");
  }
  if (mpi_launch && flags.rank && *flags.rank != launcher->rank) {
    throw InputError("--rank " + std::to_string(*flags.rank) + " disagrees with the launcher (" +
                     launcher->source + " says rank " + std::to_string(launcher->rank) + ")");
  }
  const int64_t nranks = flags.nranks ? *flags.nranks : (mpi_launch ? launcher->world_size : 1);
  if (nranks < 1) throw InputError("--nranks " + std::to_string(nranks) + ": must be >= 1");
  if (flags.rank && !flags.nranks && !mpi_launch) {
    throw InputError("--rank needs --nranks N (the number of ranks of the run)");
  }
  // This process's rank; -1 when neither --rank nor the launcher gives one.
  const int64_t rank = flags.rank ? *flags.rank : (mpi_launch ? launcher->rank : -1);
  if (flags.rank && (rank < 0 || rank >= nranks)) {
    throw InputError("--rank " + std::to_string(rank) + ": must be in [0, " +
                     std::to_string(nranks) + ") for --nranks " + std::to_string(nranks));
  }
  if (flags.local_device && *flags.local_device < 0) {
    throw InputError("--local-device " + std::to_string(*flags.local_device) + ": must be >= 0");
  }

  RankPlan plan;
  plan.launcher = mpi_launch ? launcher->source : "";
  plan.config.world_size = static_cast<int>(nranks);
  const bool cpu = flags.backend == "cpu";
  if (nranks == 1) {
    plan.mode = RankMode::kSingle;
  } else if (cpu && !mpi_launch) {
    if (flags.rank) {
      throw InputError(
          "--backend cpu runs several ranks as threads of one process (--nranks N without "
          "--rank), or one process per rank under mpirun -np N");
    }
    plan.mode = RankMode::kThreads;
  } else if (cpu) {
    // mpirun -np N with the CPU backend: one process per rank, exchanging through MPI.
    if (!have_mpi_bootstrap) {
      throw InputError("--backend cpu under mpirun (" + launcher->source +
                       " is set) needs a build with MPI (MPI was not found at configure time); "
                       "without mpirun, --nranks N runs the ranks as threads of one process");
    }
    if (!flags.nccl_id_file.empty() || flags.local_device) {
      throw InputError(std::string(flags.local_device ? "--local-device" : "--nccl-id-file") +
                       " is for --backend cuda; the cpu backend's ranks exchange through MPI");
    }
    plan.mode = RankMode::kProcessPerRank;
    plan.config.rank = static_cast<int>(rank);
    plan.use_mpi_bootstrap = true;
  } else {
    if (rank < 0) {
      throw InputError("--backend " + flags.backend + " --nranks " + std::to_string(nranks) +
                       " runs one process per rank: give each process --rank R (with "
                       "--nccl-id-file PATH), or launch with mpirun -np " +
                       std::to_string(nranks));
    }
    plan.mode = RankMode::kProcessPerRank;
    plan.config.rank = static_cast<int>(rank);
    plan.config.local_device_idx = static_cast<int>(
        flags.local_device ? *flags.local_device
                           : (mpi_launch && launcher->local_rank ? *launcher->local_rank : rank));
    plan.config.unique_id_file = flags.nccl_id_file;
    if (flags.nccl_id_file.empty()) {
      if (!have_mpi_bootstrap) {
        throw InputError(
            "--nranks " + std::to_string(nranks) +
            ": no --nccl-id-file PATH and this build has no MPI bootstrap (MPI was not found at "
            "configure time); give every rank the same --nccl-id-file on a shared file system");
      }
      if (!mpi_launch) {
        throw InputError("--nranks " + std::to_string(nranks) +
                         ": without --nccl-id-file the ranks bootstrap through MPI; launch with "
                         "mpirun -np " +
                         std::to_string(nranks));
      }
      plan.use_mpi_bootstrap = true;
    }
  }
  if (plan.mode != RankMode::kProcessPerRank) {
    if (!flags.nccl_id_file.empty()) {
      throw InputError(
          "--nccl-id-file is for one process per rank (--backend cuda --rank R "
          "--nranks N with N > 1)");
    }
    if (flags.local_device) {
      throw InputError("--local-device is for one process per rank (--rank R --nranks N)");
    }
  }
  if (plan.mode == RankMode::kSingle && flags.replica_given) {
    throw InputError(
        "--replica is for multi-rank replays (--nranks N > 1); a single rank plays "
        "the replica of each GPU chosen with --gpus/--ranks");
  }
  if (plan.mode != RankMode::kSingle && flags.gpus_given) {
    throw InputError("--gpus/--ranks choose the GPUs of a single-rank replay; with --nranks " +
                     std::to_string(nranks) + ", rank r plays GPU r of the replica");
  }
  return plan;
}

std::string rank_output_path(const std::string& path, const RankPlan& plan) {
  const std::string rank_token = "{rank}";
  const size_t at = path.find(rank_token);
  if (at == std::string::npos) {
    if (plan.mode == RankMode::kProcessPerRank && plan.config.world_size > 1) {
      throw InputError("--out " + path +
                       ": with one process per rank each writes its own file; "
                       "put {rank} in the path (e.g. --out meas.rank{rank}.jsonl)");
    }
    return path;
  }
  std::string out = path;
  out.replace(at, rank_token.size(), std::to_string(plan.config.rank));
  return out;
}

}  // namespace moesim::engine

// Mapping flags and the launcher's environment onto ranks: each mode, and a clear refusal for
// every inconsistent combination.
#include "engine/launch_ranks.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/input_error.h"

namespace moesim::engine {
namespace {

// A fake environment.
std::function<const char*(const char*)> env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const RankFlags& flags, const std::optional<LauncherRank>& launcher = {},
                     bool have_mpi = false) {
  try {
    plan_ranks(flags, launcher, have_mpi);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

RankFlags flags(const std::string& backend) {
  RankFlags f;
  f.backend = backend;
  return f;
}

TEST(LaunchRanks, ReadsOpenMpiThenPmiVariables) {
  EXPECT_FALSE(launcher_rank_from_env(env({})).has_value());
  const auto ompi = launcher_rank_from_env(env({{"OMPI_COMM_WORLD_RANK", "3"},
                                                {"OMPI_COMM_WORLD_SIZE", "8"},
                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                {"PMI_RANK", "0"},
                                                {"PMI_SIZE", "1"}}));
  ASSERT_TRUE(ompi.has_value());
  EXPECT_EQ(ompi->rank, 3);
  EXPECT_EQ(ompi->world_size, 8);
  EXPECT_EQ(ompi->local_rank, 1);
  EXPECT_EQ(ompi->source, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE");
  const auto pmi = launcher_rank_from_env(env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}));
  ASSERT_TRUE(pmi.has_value());
  EXPECT_EQ(pmi->rank, 1);
  EXPECT_FALSE(pmi->local_rank.has_value());
}

TEST(LaunchRanks, RefusesBrokenLauncherVariables) {
  EXPECT_THROW(launcher_rank_from_env(env({{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}})), InputError);
  try {
    launcher_rank_from_env(env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "launcher environment: OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE = 2/2: the rank "
                 "must be in [0, size)");
  }
  EXPECT_THROW(launcher_rank_from_env(env({{"PMI_RANK", "0"}})), InputError);
}

TEST(LaunchRanks, ChoosesTheMode) {
  EXPECT_EQ(plan_ranks(flags("cpu"), {}, false).mode, RankMode::kSingle);
  RankFlags threads = flags("cpu");
  threads.nranks = 4;
  const RankPlan t = plan_ranks(threads, {}, false);
  EXPECT_EQ(t.mode, RankMode::kThreads);
  EXPECT_EQ(t.config.world_size, 4);

  RankFlags file = flags("cuda");
  file.rank = 2;
  file.nranks = 4;
  file.nccl_id_file = "/shared/job.id";
  const RankPlan p = plan_ranks(file, {}, false);
  EXPECT_EQ(p.mode, RankMode::kProcessPerRank);
  EXPECT_EQ(p.config.rank, 2);
  EXPECT_EQ(p.config.world_size, 4);
  EXPECT_EQ(p.config.local_device_idx, 2);
  EXPECT_EQ(p.config.unique_id_file, "/shared/job.id");
  EXPECT_FALSE(p.use_mpi_bootstrap);

  // mpirun -np 8 on two nodes, MPI bootstrap: rank, size and device from the environment.
  const LauncherRank mpi{5, 8, 1, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"};
  const RankPlan m = plan_ranks(flags("cuda"), mpi, true);
  EXPECT_EQ(m.mode, RankMode::kProcessPerRank);
  EXPECT_EQ(m.config.rank, 5);
  EXPECT_EQ(m.config.world_size, 8);
  EXPECT_EQ(m.config.local_device_idx, 1);
  EXPECT_TRUE(m.use_mpi_bootstrap);
  // mpirun -np 4 with the CPU backend: one process per rank, exchanging through MPI.
  const RankPlan c = plan_ranks(flags("cpu"), LauncherRank{3, 4, 3, "PMI_RANK/PMI_SIZE"}, true);
  EXPECT_EQ(c.mode, RankMode::kProcessPerRank);
  EXPECT_EQ(c.config.rank, 3);
  EXPECT_EQ(c.config.world_size, 4);
  EXPECT_TRUE(c.use_mpi_bootstrap);
  // mpirun -np 1 is a single rank.
  EXPECT_EQ(plan_ranks(flags("cuda"), LauncherRank{0, 1, 0, "PMI_RANK/PMI_SIZE"}, false).mode,
            RankMode::kSingle);
}

TEST(LaunchRanks, RefusesInconsistentValues) {
  RankFlags f = flags("cuda");
  f.rank = 1;
  EXPECT_EQ(error_of(f), "--rank needs --nranks N (the number of ranks of the run)");
  f.nranks = 1;
  EXPECT_EQ(error_of(f), "--rank 1: must be in [0, 1) for --nranks 1");

  f = flags("cuda");
  f.nranks = 2;
  EXPECT_EQ(error_of(f),
            "--backend cuda --nranks 2 runs one process per rank: give each process --rank R "
            "(with --nccl-id-file PATH), or launch with mpirun -np 2");
  f.rank = 0;
  EXPECT_EQ(error_of(f),
            "--nranks 2: no --nccl-id-file PATH and this build has no MPI bootstrap (MPI was not "
            "found at configure time); give every rank the same --nccl-id-file on a shared file "
            "system");
  EXPECT_EQ(error_of(f, {}, true),
            "--nranks 2: without --nccl-id-file the ranks bootstrap through MPI; launch with "
            "mpirun -np 2");

  const LauncherRank mpi{1, 4, std::nullopt, "PMI_RANK/PMI_SIZE"};
  f = flags("cuda");
  f.nranks = 2;
  EXPECT_EQ(error_of(f, mpi),
            "--nranks 2 disagrees with the launcher (PMI_RANK/PMI_SIZE says 4 "
            "ranks)");
  f = flags("cuda");
  f.rank = 0;
  EXPECT_EQ(error_of(f, mpi),
            "--rank 0 disagrees with the launcher (PMI_RANK/PMI_SIZE says rank 1)");

  f = flags("cpu");
  f.rank = 0;
  f.nranks = 2;
  EXPECT_EQ(error_of(f),
            "--backend cpu runs several ranks as threads of one process (--nranks N without "
            "--rank), or one process per rank under mpirun -np N");
  EXPECT_EQ(error_of(flags("cpu"), mpi),
            "--backend cpu under mpirun (PMI_RANK/PMI_SIZE is set) needs a build with MPI (MPI "
            "was not found at configure time); without mpirun, --nranks N runs the ranks as "
            "threads of one process");
  f = flags("cpu");
  f.nccl_id_file = "/tmp/x";
  EXPECT_EQ(error_of(f, mpi, true),
            "--nccl-id-file is for --backend cuda; the cpu backend's ranks exchange through MPI");
  f = flags("cpu");
  f.local_device = 0;
  EXPECT_EQ(error_of(f, mpi, true),
            "--local-device is for --backend cuda; the cpu backend's ranks exchange through MPI");

  f = flags("cpu");
  f.nranks = 2;
  f.nccl_id_file = "/tmp/x";
  EXPECT_EQ(error_of(f),
            "--nccl-id-file is for one process per rank (--backend cuda --rank R --nranks N with "
            "N > 1)");
  f = flags("cpu");
  f.nranks = 2;
  f.gpus_given = true;
  EXPECT_EQ(error_of(f),
            "--gpus/--ranks choose the GPUs of a single-rank replay; with --nranks "
            "2, rank r plays GPU r of the replica");
  f = flags("cpu");
  f.replica_given = true;
  EXPECT_EQ(error_of(f),
            "--replica is for multi-rank replays (--nranks N > 1); a single rank plays the "
            "replica of each GPU chosen with --gpus/--ranks");
  f = flags("cpu");
  f.local_device = 1;
  EXPECT_EQ(error_of(f), "--local-device is for one process per rank (--rank R --nranks N)");
}

TEST(LaunchRanks, OutputPathPerRank) {
  RankFlags f = flags("cuda");
  f.rank = 3;
  f.nranks = 4;
  f.nccl_id_file = "/shared/id";
  const RankPlan p = plan_ranks(f, {}, false);
  EXPECT_EQ(rank_output_path("meas.rank{rank}.jsonl", p), "meas.rank3.jsonl");
  try {
    rank_output_path("meas.jsonl", p);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "--out meas.jsonl: with one process per rank each writes its own file; put "
                 "{rank} in the path (e.g. --out meas.rank{rank}.jsonl)");
  }
  const RankPlan single = plan_ranks(flags("cpu"), {}, false);
  EXPECT_EQ(rank_output_path("meas.jsonl", single), "meas.jsonl");
  EXPECT_EQ(rank_output_path("m{rank}.jsonl", single), "m0.jsonl");
}

}  // namespace
}  // namespace moesim::engine

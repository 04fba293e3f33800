// moesim under mpirun: `mpirun -np N moesim sweep ...` splits a sweep's runs over N processes
// (on one machine or many) and rank 0 writes the CSV, byte for byte what one process writes.
//
// MPI starts only when the process was launched by an MPI launcher (Open MPI's
// OMPI_COMM_WORLD_SIZE, or PMI_SIZE, set to more than 1), so every other run of moesim stays an
// ordinary process. A moesim built without MPI refuses such a launch instead of running the same
// sweep N times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/study/rank_group.h"

namespace moesim::cli {

// The ranks of the MPI job as the studies see them (sim/study/rank_group.h).
class MpiWorld final : public sim::study::RankGroup {
 public:
  // Starts MPI when launched by an MPI launcher with more than one process; throws UsageError
  // when launched so by a build without MPI.
  MpiWorld();
  // Finalizes MPI if this object started it.
  ~MpiWorld() override;
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }
  std::vector<std::string> gather_to_root(const std::string& text) const override;
  int64_t sum(int64_t value) const override;
  int64_t max(int64_t value) const override;
  // Ends every rank of the job with `exit_code` (after a rank failed on its own: the others
  // would wait in a collective forever). Does not return.
  [[noreturn]] void abort(int exit_code) const;

 private:
  int32_t rank_ = 0;
  int32_t size_ = 1;
  bool started_ = false;
};

// The process count an MPI launcher gave this process (1 when none did).
int32_t mpi_launch_size();

}  // namespace moesim::cli

// The processes a study is split over: under `mpirun -np N` the ranks of the MPI job, else one
// process. The studies (sweep, search) only gather text on rank 0 and reduce counts; the MPI
// calls themselves stay at the command line's edge (apps/moesim/mpi_world.h implements this
// interface), so the simulator links no MPI library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moesim::sim::study {

class RankGroup {
 public:
  virtual ~RankGroup() = default;
  virtual int32_t rank() const = 0;  // in [0, size())
  virtual int32_t size() const = 0;  // >= 1
  bool active() const { return size() > 1; }
  // Every rank's `text`, in rank order, on rank 0; empty on the others. Collective.
  virtual std::vector<std::string> gather_to_root(const std::string& text) const = 0;
  // The sum / the maximum of `value` over the ranks, on every rank. Collective.
  virtual int64_t sum(int64_t value) const = 0;
  virtual int64_t max(int64_t value) const = 0;
};

// One process: rank 0 of 1.
class SingleProcess final : public RankGroup {
 public:
  int32_t rank() const override { return 0; }
  int32_t size() const override { return 1; }
  std::vector<std::string> gather_to_root(const std::string& text) const override { return {text}; }
  int64_t sum(int64_t value) const override { return value; }
  int64_t max(int64_t value) const override { return value; }
};

}  // namespace moesim::sim::study

// Measured all-to-alls for the network fit (network_fit.h), from the two forms a cluster produces:
// nccl-tests `alltoall_perf` output (one sample per size line; each rank sends (n - 1) / n of
// its `size` to the others; the out-of-place time) and the measured dispatch / combine records
// of a multi-rank engine replay (one sample per (trace, replica, step, layer, op) over all
// ranks: mean volume per GPU, the slowest rank's time; a skewed exchange is read as a uniform
// one, so record such traces with uniform routing). `collective` records of measurement files
// are read by measurement_reader.h. docs/calibration.md ("Network calibration").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/calibration/measurement_reader.h"
#include "sim/calibration/network_fit.h"

namespace moesim::sim {

// Parses alltoall_perf output. `num_ranks` 0 counts the "# Rank" lines. Throws ConfigError
// (file `name`) when no rank count is known, it is below 2, or no size line parses.
std::vector<CollectiveSample> parse_nccl_tests_alltoall(std::string_view text,
                                                        const std::string& name,
                                                        int32_t num_ranks = 0);
// Reads and parses a file (ConfigError when it cannot be opened).
std::vector<CollectiveSample> read_nccl_tests_alltoall(const std::string& path,
                                                       int32_t num_ranks = 0);

// The samples of `sets`: their `collective` records, then the engine all-to-all records grouped
// as in the file comment (groups ordered by trace, replica, step, layer, op).
std::vector<CollectiveSample> collective_samples_of(const std::vector<MeasurementSet>& sets);

}  // namespace moesim::sim

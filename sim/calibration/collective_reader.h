// Measured all-to-alls for the network fit (network_fit.h), from the two forms a cluster produces:
//  - nccl-tests `alltoall_perf` output: one sample per size line. nccl-tests' `size` is the bytes
//    each rank's send buffer holds, of which it sends size / nranks to every rank including
//    itself, so bytes_per_gpu = size (nranks - 1) / nranks; time is the out-of-place column (us).
//    nranks is counted from the "#  Rank N ..." lines unless given;
//  - the measured dispatch_a2a / combine_a2a op records of a multi-rank engine replay (one
//    measurement file per rank, docs/engine.md): the records of one (trace, replica, step,
//    layer, op) over all ranks form one sample, ep_size = the GPUs the files played for that
//    trace, bytes_per_gpu = the records' bytes (sent + received) summed / (2 ep_size), and
//    measured = the slowest rank's time. A skewed all-to-all is thereby read as a uniform one of
//    the same mean volume (which makes its efficiency look lower): replay traces recorded with
//    uniform routing for the network calibration (docs/calibration.md).
// `collective` records of measurement files are read by measurement_reader.h.
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

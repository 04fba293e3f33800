// Joins the CSVs that the shards of one sweep wrote (`moesim sweep --shard K/N`) into the CSV of
// the whole sweep, byte for byte what an unsharded run writes.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace moesim::sim::study {

// Reads the shard CSVs at `paths` and writes their common header, then every row in run_idx
// order, to `out`. Checks that the headers are identical, that every row has the header's number
// of cells and the same num_runs, and that each run_idx in [0, num_runs) appears exactly once.
// Throws ConfigError naming the file and line of a mismatch or duplicate, or listing the missing
// run_idx values; nothing is written then.
void merge_sweep_csvs(const std::vector<std::string>& paths, std::ostream& out);

}  // namespace moesim::sim::study

// Joins the CSVs that the shards of one sweep wrote (`moesim sweep --shard K/N`) into the CSV of
// the whole sweep, byte for byte what an unsharded run writes.
#pragma once

#include <istream>
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

// The same over CSVs already open (e.g. the shards that MPI ranks sent): `name` stands for the
// file in messages.
struct NamedCsv {
  std::string name;
  std::istream* in = nullptr;
};
void merge_sweep_csv_streams(const std::vector<NamedCsv>& inputs, std::ostream& out);

}  // namespace moesim::sim::study

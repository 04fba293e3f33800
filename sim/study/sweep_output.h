// Where a sweep's CSV goes (`moesim sweep --out FILE.csv [--resume]`, or a stream), on one
// process or over the ranks of an MPI job. One process grows FILE.csv.partial row by row (each
// row fsync'd, so --resume after a kill goes on from the last complete row) and renames it to
// FILE.csv when complete; under MPI every rank runs its shard and rank 0 writes the merged CSV
// atomically, byte for byte what one process writes. A device, FIFO or symbolic link given as
// FILE.csv is written in place, without a journal.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "sim/study/rank_group.h"
#include "sim/study/sweep.h"

namespace moesim::sim::study {

struct SweepOutput {
  std::optional<std::string> out_path;  // FILE.csv; absent: `stream`
  bool resume = false;                  // go on from FILE.csv.partial (one process, plain file)
  std::ostream* stream = nullptr;       // the CSV without out_path (rank 0); required then
};

// Whether `path` is absent or a regular file (not a device, FIFO or link): only such an output
// is journaled and can be resumed.
bool is_plain_output_file(const std::string& path);

struct SweepOutcome {
  SweepStats stats;         // the job's (summed over the ranks)
  int64_t num_resumed = 0;  // rows kept from FILE.csv.partial
  std::string csv;          // the whole CSV as written (rank 0), for the planner's table
  bool is_root = true;      // false on MPI ranks other than 0 (they write nothing)
};

// Runs the sweep (run_sweep) into `output`: checks the output file first (rank 0, option
// "--out"), resumes from the journal when asked and refuses a journal holding finished runs when
// not (ConfigError naming how many, --resume and deleting it), and under an active `ranks` runs
// shard rank + 1 of size and merges the shards on rank 0. `progress(done, total, resumed)` counts
// this process's runs, `resumed` of them taken from the journal. Throws OutputError when the
// CSV cannot be written.
SweepOutcome write_sweep(const SweepSpec& spec, const ScenarioTemplate& scenario,
                         SweepOptions options, const SweepOutput& output, const RankGroup& ranks,
                         const std::function<void(int64_t, int64_t, int64_t)>& progress);

}  // namespace moesim::sim::study

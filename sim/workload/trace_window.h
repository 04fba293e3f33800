// The rows of a trace that a trace workload uses, and what the sustained replays (loop, model)
// derive from them: the lap length, the window's mean rate and which prefix-block hash ids are
// shared by many requests.
//
// A lap is the window's length: end_s - start_s when end_s bounds the rows, else the span from
// start_s to the last row plus one mean gap, so that looping keeps every inter-arrival gap and
// adds one ordinary gap at the seam. The shared-id rule separates content that every request
// starts with (Mooncake's conversation trace: hash id 0, a system prompt in all 12,031 rows) from
// a conversation's own history (no other id is in more than 3.7% of any window's rows): looping
// or resampling keeps the first and gives the second fresh ids, docs/workload.md.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/core/time.h"
#include "sim/workload/trace_record.h"

namespace moesim::sim {

struct TraceWindow {
  size_t begin_idx = 0;  // first row of the window (index into the records)
  size_t end_idx = 0;    // one past its last row
  SimTime start_ns = 0;  // trace time of start_s: a row at start_ns arrives at 0
  // The lap length in trace time; 0 when the window gives none (one row without end_s, or all
  // rows at start_s without end_s); kSimTimeMax when the lap would not fit in int64 ns (a row
  // past the simulation horizon).
  SimTime period_ns = 0;

  size_t num_rows() const { return end_idx - begin_idx; }
  // Requests per second of trace time over a lap (num_rows / period); 0 without a period.
  double rate_per_s() const;
};

// The rows with timestamps in [start_s, end_s) (end_s absent: to the end), the first
// max_requests of them when given. `rows` must be in time order.
TraceWindow select_trace_window(const std::vector<TraceRecord>& rows, double start_s,
                                std::optional<double> end_s, std::optional<int64_t> max_requests);

// A hash id is shared when at least this fraction of the window's rows, and at least
// kMinSharedRows of them, carry it.
inline constexpr double kSharedHashRowFraction = 0.1;
inline constexpr int64_t kMinSharedRows = 3;

// The window's shared hash ids, sorted ascending.
std::vector<uint64_t> shared_hash_ids(const std::vector<TraceRecord>& rows,
                                      const TraceWindow& window);
// The largest hash id in the window's rows plus one (0 without hash ids).
uint64_t hash_id_bound(const std::vector<TraceRecord>& rows, const TraceWindow& window);

}  // namespace moesim::sim

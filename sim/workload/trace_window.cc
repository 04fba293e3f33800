#include "sim/workload/trace_window.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/checked_number.h"

namespace moesim::sim {

double TraceWindow::rate_per_s() const {
  if (period_ns <= 0) return 0.0;
  return static_cast<double>(num_rows()) / to_seconds(period_ns);
}

TraceWindow select_trace_window(const std::vector<TraceRecord>& rows, double start_s,
                                std::optional<double> end_s, std::optional<int64_t> max_requests) {
  const auto by_time = [](const TraceRecord& r, SimTime t_ns) { return r.timestamp_ns < t_ns; };
  TraceWindow w;
  w.start_ns = from_seconds(start_s);
  w.begin_idx = std::lower_bound(rows.begin(), rows.end(), w.start_ns, by_time) - rows.begin();
  w.end_idx = rows.size();
  if (end_s) {
    w.end_idx =
        std::lower_bound(rows.begin(), rows.end(), from_seconds(*end_s), by_time) - rows.begin();
  }
  bool cut = false;
  if (max_requests && w.begin_idx + static_cast<size_t>(*max_requests) < w.end_idx) {
    w.end_idx = w.begin_idx + static_cast<size_t>(*max_requests);
    cut = true;
  }
  const size_t n = w.num_rows();
  if (n == 0) return w;
  if (end_s && !cut) {
    w.period_ns = from_seconds(*end_s) - w.start_ns;
  } else if (n >= 2) {
    const SimTime first_ns = rows[w.begin_idx].timestamp_ns;
    const SimTime last_ns = rows[w.end_idx - 1].timestamp_ns;
    const double mean_gap_ns = static_cast<double>(last_ns - first_ns) / static_cast<double>(n - 1);
    // A row near the end of int64 time (past the horizon) would overflow the sum: such a lap is
    // longer than any simulation, and kSimTimeMax says so (the loop modes refuse it).
    const std::optional<int64_t> gap_ns = checked_llround(mean_gap_ns);
    const std::optional<int64_t> span_ns = checked_sub(last_ns, w.start_ns);
    const std::optional<int64_t> lap_ns =
        gap_ns && span_ns ? checked_add(*span_ns, *gap_ns) : std::nullopt;
    w.period_ns = lap_ns ? *lap_ns : kSimTimeMax;
  }
  return w;
}

std::vector<uint64_t> shared_hash_ids(const std::vector<TraceRecord>& rows,
                                      const TraceWindow& window) {
  std::map<uint64_t, int64_t> num_rows;  // rows carrying the id
  std::vector<uint64_t> ids;
  for (size_t i = window.begin_idx; i < window.end_idx; ++i) {
    ids = rows[i].hash_ids;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (uint64_t h : ids) ++num_rows[h];
  }
  const double min_rows = std::max(static_cast<double>(kMinSharedRows),
                                   kSharedHashRowFraction * static_cast<double>(window.num_rows()));
  std::vector<uint64_t> shared;
  for (const auto& [h, count] : num_rows) {
    if (static_cast<double>(count) >= min_rows) shared.push_back(h);
  }
  return shared;
}

uint64_t hash_id_bound(const std::vector<TraceRecord>& rows, const TraceWindow& window) {
  uint64_t bound = 0;
  for (size_t i = window.begin_idx; i < window.end_idx; ++i) {
    for (uint64_t h : rows[i].hash_ids) bound = std::max(bound, h + 1);
  }
  return bound;
}

}  // namespace moesim::sim

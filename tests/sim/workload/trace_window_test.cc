#include "sim/workload/trace_window.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

std::vector<TraceRecord> rows_at_ms(const std::vector<int64_t>& times_ms) {
  std::vector<TraceRecord> rows;
  for (int64_t t : times_ms) {
    TraceRecord r;
    r.timestamp_ns = t * kNsPerMs;
    r.input_tokens = r.output_tokens = 1;
    rows.push_back(r);
  }
  return rows;
}

TEST(TraceWindow, LapIsEndMinusStartOrTheSpanPlusOneMeanGap) {
  const std::vector<TraceRecord> rows = rows_at_ms({0, 1000, 3000, 7000});
  // end_s bounds the rows: the lap is the window.
  TraceWindow w = select_trace_window(rows, 0.5, 5.0, std::nullopt);
  EXPECT_EQ(w.begin_idx, 1u);
  EXPECT_EQ(w.end_idx, 3u);
  EXPECT_EQ(w.start_ns, 500 * kNsPerMs);
  EXPECT_EQ(w.period_ns, 4500 * kNsPerMs);
  EXPECT_DOUBLE_EQ(w.rate_per_s(), 2 / 4.5);
  // No end_s: last row - start + mean gap ((7000 - 0) / 3).
  w = select_trace_window(rows, 0.0, std::nullopt, std::nullopt);
  EXPECT_EQ(w.num_rows(), 4u);
  EXPECT_EQ(w.period_ns, 7000 * kNsPerMs + 2'333'333'333);
  // max_requests cuts the window short of end_s: the lap ends one mean gap after the last row.
  w = select_trace_window(rows, 0.0, 10.0, 2);
  EXPECT_EQ(w.num_rows(), 2u);
  EXPECT_EQ(w.period_ns, 2000 * kNsPerMs);
  // One row without end_s, or rows all at start_s: no lap length.
  EXPECT_EQ(select_trace_window(rows, 6.0, std::nullopt, std::nullopt).period_ns, 0);
  EXPECT_EQ(select_trace_window(rows_at_ms({0, 0, 0}), 0.0, std::nullopt, std::nullopt).period_ns,
            0);
  EXPECT_EQ(
      select_trace_window(rows_at_ms({0, 0, 0}), 0.0, std::nullopt, std::nullopt).rate_per_s(),
      0.0);
}

TEST(TraceWindow, SharedIdsAreInATenthOfTheRowsAndAtLeastThree) {
  std::vector<TraceRecord> rows = rows_at_ms({0, 0, 0, 0});
  rows[0].hash_ids = {7, 1, 1};  // a repeated id counts once per row
  rows[1].hash_ids = {7, 1};
  rows[2].hash_ids = {7, 2};
  rows[3].hash_ids = {9, 3};
  TraceWindow w = select_trace_window(rows, 0.0, 1.0, std::nullopt);
  EXPECT_EQ(shared_hash_ids(rows, w), (std::vector<uint64_t>{7}));
  EXPECT_EQ(hash_id_bound(rows, w), 10u);
  // 40 rows: 10% is 4 rows, so an id in 3 of them is private.
  std::vector<TraceRecord> many = rows_at_ms(std::vector<int64_t>(40, 0));
  for (int i = 0; i < 3; ++i) many[i].hash_ids = {5};
  for (int i = 3; i < 7; ++i) many[i].hash_ids = {6};
  w = select_trace_window(many, 0.0, 1.0, std::nullopt);
  EXPECT_EQ(shared_hash_ids(many, w), (std::vector<uint64_t>{6}));
}

}  // namespace
}  // namespace moesim::sim

#include "sim/study/parallel_runs.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace moesim::sim::study {
namespace {

TEST(ParallelRuns, DeliversInJobOrder) {
  for (int32_t threads : {1, 2, 3, 8}) {
    std::vector<int64_t> delivered;
    int64_t last_done = 0;
    run_in_order<int64_t>(
        50, threads,
        [](int64_t i) {
          // Uneven work so that threads finish out of order.
          int64_t x = 0;
          for (int64_t k = 0; k < (50 - i) * 2000; ++k) x += k % 7;
          return i * 10 + (x < 0 ? 1 : 0);
        },
        [&](int64_t i, int64_t& r) {
          EXPECT_EQ(r, i * 10);
          delivered.push_back(i);
        },
        [&](int64_t done, int64_t total) {
          EXPECT_EQ(done, last_done + 1);
          EXPECT_EQ(total, 50);
          last_done = done;
        });
    ASSERT_EQ(delivered.size(), 50u) << threads;
    for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(delivered[static_cast<size_t>(i)], i);
    EXPECT_EQ(last_done, 50);
  }
}

TEST(ParallelRuns, NoJobs) {
  int calls = 0;
  run_in_order<int>(
      0, 4, [](int64_t) { return 1; }, [&](int64_t, int&) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ParallelRuns, RethrowsAJobsException) {
  EXPECT_THROW(run_in_order<int>(
                   20, 2,
                   [](int64_t i) -> int {
                     if (i == 7) throw std::runtime_error("job 7");
                     return 0;
                   },
                   [](int64_t, int&) {}),
               std::runtime_error);
}

}  // namespace
}  // namespace moesim::sim::study

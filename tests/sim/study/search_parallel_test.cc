// Speculative parallel probes (search.h, ProbeParallelism): the search with 2..5 probe threads
// makes the same decisions, probes and results as the one-at-a-time search.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sim/study/search.h"

namespace moesim::sim::study {
namespace {

// The search as it was written before parallel probes (one loop, one probe at a time): the
// reference the state machine of search.cc must reproduce.
struct Reference {
  MultiplierSearch search;
  std::vector<double> probes;
};
Reference reference_search(const std::function<bool(double)>& meets, double rel_tolerance,
                           int32_t max_doublings) {
  Reference r;
  auto probe = [&](double m) {
    ++r.search.num_probes;
    r.probes.push_back(m);
    return meets(m);
  };
  double lo = 0, hi = 0;
  if (probe(1.0)) {
    lo = 1.0;
    for (int32_t k = 0; k < max_doublings; ++k) {
      double m = lo * 2.0;
      if (!probe(m)) {
        hi = m;
        break;
      }
      lo = m;
    }
  } else {
    hi = 1.0;
    for (int32_t k = 0; k < max_doublings; ++k) {
      double m = hi / 2.0;
      if (probe(m)) {
        lo = m;
        break;
      }
      hi = m;
    }
  }
  if (lo > 0 && hi > 0) {
    while (hi / lo > 1.0 + rel_tolerance) {
      double mid = std::sqrt(lo * hi);
      if (probe(mid)) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
  }
  r.search.found = lo > 0;
  r.search.max_ok = lo;
  r.search.min_fail = hi;
  return r;
}

struct ParallelRun {
  MultiplierSearch search;
  std::vector<double> kept;
  int32_t num_evaluated = 0;
  int max_concurrent = 0;
};

// search_max_multiplier on threads; each verdict takes a few microseconds that depend on the
// multiplier, so verdicts arrive out of order.
ParallelRun parallel_search(const std::function<bool(double)>& meets, double rel_tolerance,
                            int32_t max_doublings, int32_t num_threads) {
  ParallelRun run;
  std::atomic<int> running{0}, max_running{0};
  auto slow_meets = [&](double m) {
    int now = ++running;
    int seen = max_running.load();
    while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
    }
    const int64_t bits = static_cast<int64_t>(std::fmod(m * 7919.0, 1.0) * 40.0);
    std::this_thread::sleep_for(std::chrono::microseconds(bits));
    bool ok = false;
    try {
      ok = meets(m);
    } catch (...) {
      --running;
      throw;
    }
    --running;
    return ok;
  };
  ProbeParallelism parallel;
  parallel.num_threads = num_threads;
  parallel.kept = [&](double m) { run.kept.push_back(m); };
  parallel.num_evaluated = &run.num_evaluated;
  run.search = search_max_multiplier(slow_meets, rel_tolerance, max_doublings, parallel);
  run.max_concurrent = max_running.load();
  return run;
}

TEST(SearchParallel, SpeculativeProbesMatchTheSequentialSearch) {
  const double inf = std::numeric_limits<double>::infinity();
  // Thresholds below 1, between the doublings, on them, above 2^max_doublings; 0 never meets,
  // infinity always does.
  const std::vector<double> thresholds = {0,   1e-6, 0.001, 0.3, 0.5, 0.7, 0.99, 1.0,  1.0001,
                                          1.5, 2.0,  3.7,   8.0, 7.9, 100, 1000, 1e-4, inf};
  const std::vector<double> tolerances = {0.5, 0.1, 0.02, 1e-3};
  const std::vector<int32_t> doublings = {0, 1, 2, 4, 10};
  int num_cases = 0, num_long = 0, num_speculated = 0, num_overlapping = 0;
  for (double threshold : thresholds) {
    for (bool inclusive : {true, false}) {
      auto meets = [=](double m) { return inclusive ? m <= threshold : m < threshold; };
      for (double tol : tolerances) {
        for (int32_t k : doublings) {
          const Reference ref = reference_search(meets, tol, k);
          for (int32_t threads = 1; threads <= 5; ++threads) {
            SCOPED_TRACE(testing::Message()
                         << "threshold " << threshold << " inclusive " << inclusive << " tol "
                         << tol << " doublings " << k << " threads " << threads);
            const ParallelRun run = parallel_search(meets, tol, k, threads);
            EXPECT_EQ(run.search.found, ref.search.found);
            EXPECT_EQ(run.search.max_ok, ref.search.max_ok);
            EXPECT_EQ(run.search.min_fail, ref.search.min_fail);
            EXPECT_EQ(run.search.num_probes, ref.search.num_probes);
            EXPECT_EQ(run.kept, ref.probes);
            EXPECT_GE(run.num_evaluated, run.search.num_probes);
            if (threads == 1) {
              EXPECT_EQ(run.num_evaluated, run.search.num_probes);
              EXPECT_EQ(run.max_concurrent, 1);
            }
            EXPECT_LE(run.max_concurrent, threads);
            ++num_cases;
            if (threads > 1 && ref.search.num_probes >= 4) {
              ++num_long;
              num_speculated += run.num_evaluated > run.search.num_probes;
              num_overlapping += run.max_concurrent > 1;
            }
          }
        }
      }
    }
  }
  // The parallel searches of 4 probes or more did speculate and did run probes at the same time
  // (most of them: how many depends on the threads' timing).
  EXPECT_EQ(num_cases, 18 * 2 * 4 * 5 * 5);
  EXPECT_GT(num_long, num_cases / 3);
  EXPECT_GT(num_speculated, num_long / 2);
  EXPECT_GT(num_overlapping, num_long / 2);
  std::printf("%d parallel searches of 4 probes or more: %d speculated, %d overlapped probes\n",
              num_long, num_speculated, num_overlapping);
}

// Hand-worked: threshold 3.7, tolerance 0.1, at most 10 doublings. The one-at-a-time search
// probes 1, 2, 4 (fails), sqrt(8) = 2.83, sqrt(2.83 x 4) = 3.36 (4 / 3.36 = 1.19 > 1.1),
// sqrt(3.36 x 4) = 3.67 (meets; 4 / 3.67 = 1.09 <= 1.1).
TEST(SearchParallel, HandWorkedProbeSequence) {
  auto meets = [](double m) { return m <= 3.7; };
  const double m4 = std::sqrt(8.0), m5 = std::sqrt(m4 * 4.0), m6 = std::sqrt(m5 * 4.0);
  for (int32_t threads : {1, 2, 3, 4}) {
    const ParallelRun run = parallel_search(meets, 0.1, 10, threads);
    EXPECT_EQ(run.kept, (std::vector<double>{1, 2, 4, m4, m5, m6})) << threads;
    EXPECT_TRUE(run.search.found);
    EXPECT_EQ(run.search.max_ok, m6);
    EXPECT_EQ(run.search.min_fail, 4.0);
    EXPECT_EQ(run.search.num_probes, 6);
  }
}

// A probe that throws ends the search when the search needs its verdict (after the probes before
// it were kept), and changes nothing when only a speculative probe threw.
TEST(SearchParallel, ExceptionsOnlyFromProbesTheSearchMakes) {
  // Threshold 3.7: the search fails at 4 and never probes 8, 16 or 0.5.
  auto throws_off_path = [](double m) {
    if (m == 8.0 || m == 16.0 || m == 0.5) throw std::runtime_error("speculative");
    return m <= 3.7;
  };
  const Reference ref = reference_search([](double m) { return m <= 3.7; }, 0.02, 10);
  int num_threw = 0;
  for (int32_t threads = 1; threads <= 5; ++threads) {
    ParallelRun run = parallel_search(throws_off_path, 0.02, 10, threads);
    EXPECT_EQ(run.kept, ref.probes) << threads;
    EXPECT_EQ(run.search.max_ok, ref.search.max_ok) << threads;
    num_threw += run.num_evaluated > run.search.num_probes;
  }
  EXPECT_GT(num_threw, 0);
  auto throws_on_path = [](double m) {
    if (m == 4.0) throw std::runtime_error("probe at 4");
    return m <= 3.7;
  };
  for (int32_t threads = 1; threads <= 5; ++threads) {
    std::vector<double> kept;
    ProbeParallelism parallel;
    parallel.num_threads = threads;
    parallel.kept = [&](double m) { kept.push_back(m); };
    try {
      search_max_multiplier(throws_on_path, 0.02, 10, parallel);
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "probe at 4");
    }
    EXPECT_EQ(kept, (std::vector<double>{1, 2})) << threads;
  }
}

// A running probe the search can no longer need is told to stop. On 2 threads, 1 runs on one and
// 2 (the likelier next probe) on the other; the probe at 1 waits until the one at 2 has started,
// then fails, so 2 lies above the bracket: its stop flag turns true (it waits for it, bounded so
// that a missing stop fails rather than hangs), and the search goes on below 1 as it does alone.
TEST(SearchParallel, ProbesTheSearchPassesByAreStopped) {
  std::mutex mu;
  std::condition_variable cv;
  bool two_started = false;
  std::atomic<bool> two_saw_stop{false};
  auto verdict = [](double m) { return m == 2.0 || (m != 1.0 && m <= 0.7); };
  const ProbeFunction meets = [&](double m, const std::atomic<bool>& stop) {
    if (m == 2.0) {
      {
        std::lock_guard<std::mutex> lock(mu);
        two_started = true;
      }
      cv.notify_all();
      for (int i = 0; i < 60'000 && !stop.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      two_saw_stop = stop.load();
    } else if (m == 1.0) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::seconds(60), [&] { return two_started; });
    }
    return verdict(m);
  };
  const Reference ref = reference_search(verdict, 0.02, 4);
  std::vector<double> kept;
  int32_t num_stopped = 0;
  ProbeParallelism parallel;
  parallel.num_threads = 2;
  parallel.kept = [&](double m) { kept.push_back(m); };
  parallel.num_stopped = &num_stopped;
  const MultiplierSearch s = search_max_multiplier(meets, 0.02, 4, parallel);
  EXPECT_TRUE(two_saw_stop);
  EXPECT_GE(num_stopped, 1);
  EXPECT_EQ(kept, ref.probes);
  EXPECT_EQ(s.max_ok, ref.search.max_ok);
  EXPECT_EQ(s.min_fail, ref.search.min_fail);
}

}  // namespace
}  // namespace moesim::sim::study

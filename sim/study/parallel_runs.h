// Runs independent jobs on a pool of threads and hands their results over in job order.
//
// Job i's result goes to `deliver` only after the results of jobs 0..i-1, whatever order the
// threads finish in, so anything written from `deliver` is the same for every thread count.
// Jobs must share no mutable state (each simulation owns its Simulation); `deliver` and
// `progress` are called under one lock, never concurrently.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace moesim::sim::study {

// Threads to use when the user names none: the machine's hardware threads, at least 1.
inline int32_t default_num_threads() {
  return static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
}

// Runs job(0) .. job(num_jobs - 1) on min(num_threads, num_jobs) threads (num_threads >= 1).
// deliver(i, result) is called in increasing i; progress(num_done, num_jobs) after each job
// (in completion order). The first exception thrown by a job or a callback stops the taking of
// new jobs and is rethrown here once running jobs end.
template <typename Result>
void run_in_order(int64_t num_jobs, int32_t num_threads, const std::function<Result(int64_t)>& job,
                  const std::function<void(int64_t, Result&)>& deliver,
                  const std::function<void(int64_t, int64_t)>& progress = {}) {
  std::vector<std::optional<Result>> results(static_cast<size_t>(num_jobs));
  std::atomic<int64_t> next_job{0};
  std::mutex mu;
  int64_t next_delivery = 0, num_done = 0;
  std::exception_ptr error;
  std::atomic<bool> failed{false};

  auto worker = [&] {
    while (!failed.load()) {
      int64_t i = next_job.fetch_add(1);
      if (i >= num_jobs) return;
      try {
        Result r = job(i);
        std::lock_guard<std::mutex> lock(mu);
        results[static_cast<size_t>(i)] = std::move(r);
        ++num_done;
        if (progress) progress(num_done, num_jobs);
        while (next_delivery < num_jobs && results[static_cast<size_t>(next_delivery)]) {
          deliver(next_delivery, *results[static_cast<size_t>(next_delivery)]);
          results[static_cast<size_t>(next_delivery)].reset();
          ++next_delivery;
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed.store(true);
        return;
      }
    }
  };

  int64_t n = std::min<int64_t>(std::max(1, num_threads), std::max<int64_t>(num_jobs, 1));
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace moesim::sim::study

#include "engine/timing.h"

#include <algorithm>

#include "base/check.h"

namespace moesim::engine {

int64_t median_ns(std::vector<int64_t> samples) {
  MOESIM_CHECK(!samples.empty(), "median of no samples");
  const size_t mid = (samples.size() - 1) / 2;
  std::nth_element(samples.begin(), samples.begin() + mid, samples.end());
  return samples[mid];
}

TimingStats time_op(Backend& backend, int warmup_runs, int repeats,
                    const std::function<void()>& op) {
  MOESIM_CHECK(repeats >= 1 && warmup_runs >= 0, "time_op: repeats >= 1, warmup >= 0");
  for (int i = 0; i < warmup_runs; ++i) op();
  backend.synchronize();
  std::unique_ptr<Timer> timer = backend.make_timer();
  TimingStats stats;
  for (int i = 0; i < repeats; ++i) {
    timer->start();
    op();
    timer->stop();
    stats.samples_ns.push_back(timer->elapsed_ns());
  }
  stats.median_ns = median_ns(stats.samples_ns);
  stats.min_ns = *std::min_element(stats.samples_ns.begin(), stats.samples_ns.end());
  stats.max_ns = *std::max_element(stats.samples_ns.begin(), stats.samples_ns.end());
  return stats;
}

}  // namespace moesim::engine

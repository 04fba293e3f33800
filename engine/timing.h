// Timing one operation: warm-up runs, then timed repeats, each bracketed by the backend's Timer
// (CUDA events on GPUs, steady_clock on the CPU). The median is what measurements report.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend.h"

namespace moesim::engine {

struct TimingStats {
  int64_t median_ns = 0;  // lower median for an even count
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  std::vector<int64_t> samples_ns;  // in run order
};

// Runs `op` warmup_runs times untimed, then repeats times timed (repeats >= 1), synchronising
// the backend before the first timed run.
TimingStats time_op(Backend& backend, int warmup_runs, int repeats,
                    const std::function<void()>& op);

// Median (lower median for an even count) of non-empty `samples`.
int64_t median_ns(std::vector<int64_t> samples);

}  // namespace moesim::engine

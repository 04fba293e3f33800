// The fidelity check during a run (docs/fast_fidelity.md): every N-th step of every replica (step
// index a multiple of N) is also timed by the replica's check replica on the other fidelity, with
// the same batch, placement, routing model and host-link slowdown. The check never changes the run:
// its durations are only recorded. Steps with a background transfer in flight are skipped (the
// check replica carries none).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/serving/fidelity_check.h"
#include "sim/serving/replica.h"
#include "sim/serving/step_model.h"

namespace moesim::sim {

class FidelityChecker {
 public:
  // Every `every`-th step (> 0).
  explicit FidelityChecker(int64_t every) : every_(every) {}

  // After r's step `input` was timed as `result`: times it on r's check replica when sampled.
  void check(const Replica& r, const StepInput& input, const StepResult& result);
  std::vector<FidelitySample>& samples() { return samples_; }
  int64_t skipped() const { return skipped_; }

 private:
  int64_t every_ = 1;
  std::vector<FidelitySample> samples_;
  int64_t skipped_ = 0;
};

}  // namespace moesim::sim

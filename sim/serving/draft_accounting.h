// Speculative decoding's accounting per step (docs/serving.md, "Speculative decoding"): the draft
// passes' share of the step in the run's totals, and the draft GPUs of their own busy in the
// passes and idle otherwise, in their GPU records and the totals.
#pragma once

#include "sim/metrics/run_recorder.h"
#include "sim/serving/replica.h"
#include "sim/serving/speculative.h"
#include "sim/serving/step_result.h"

namespace moesim::sim {

class DraftAccounting {
 public:
  // References must outlive this object.
  DraftAccounting(DraftAcceptance& acceptance, RunRecorder& recorder)
      : acceptance_(acceptance), recorder_(recorder) {}
  // After r's step was timed as `res`.
  void on_step(const Replica& r, const StepResult& res);

 private:
  DraftAcceptance& acceptance_;
  RunRecorder& recorder_;
};

}  // namespace moesim::sim

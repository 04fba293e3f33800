#include "sim/serving/fidelity_checker.h"

namespace moesim::sim {

void FidelityChecker::check(const Replica& r, const StepInput& input, const StepResult& result) {
  if (!r.check.step_model || input.step_idx % every_ != 0) return;
  if (any_remaining(*r.transfers)) {
    skipped_++;
    return;
  }
  StepInput other_input = input;
  other_input.observer = nullptr;
  const StepResult& other = r.check.step_model->run(other_input);
  const bool main_fast = r.step_model().fast_fidelity();
  const StepResult& fast = main_fast ? result : other;
  FidelitySample s;
  s.replica = r.idx;
  s.step = input.step_idx;
  s.exact_ns = main_fast ? other.duration_ns : result.duration_ns;
  s.fast_ns = fast.duration_ns;
  s.fast_layers = fast.num_fast_layers;
  s.exact_layers = fast.num_exact_layers;
  samples_.push_back(s);
}

}  // namespace moesim::sim

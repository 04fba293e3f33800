// The step model's fidelity (docs/fast_fidelity.md): "exact" times every MoE layer from its
// (source, destination) matrix through the network model; "fast" draws per-destination totals and
// times the collectives from per-GPU sums where that applies. A scenario names it in
// [run] fidelity; the step model takes it in StepModelOptions::fidelity.
#pragma once

namespace moesim::sim {

enum class Fidelity { kExact, kFast };

// "exact" or "fast".
inline const char* fidelity_name(Fidelity fidelity) {
  return fidelity == Fidelity::kFast ? "fast" : "exact";
}

}  // namespace moesim::sim

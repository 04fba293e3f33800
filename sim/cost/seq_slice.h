// One sequence's share of a step: the unit attention is priced in (sim/cost/op_formulas.h) and
// the serving layer schedules (sim/serving/step_model.h).
#pragma once

#include <cstdint>

namespace moesim::sim {

// One sequence's share of a step on its attention rank.
struct SeqSlice {
  int64_t new_tokens = 0;      // tokens computed this step (a prefill chunk, or 1 for decode)
  int64_t context_tokens = 0;  // tokens already in the cache before this step
  bool prefill = false;
};

}  // namespace moesim::sim

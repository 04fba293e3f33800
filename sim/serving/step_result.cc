#include "sim/serving/step_result.h"

namespace moesim::sim {

double BackgroundTransfer::remaining_total() const {
  double t = 0;
  for (double b : remaining_bytes) t += b;
  return t;
}

bool any_remaining(const std::vector<BackgroundTransfer>& transfers) {
  for (const BackgroundTransfer& t : transfers) {
    if (t.remaining_total() > 0) return true;
  }
  return false;
}

}  // namespace moesim::sim

#include "sim/core/state_version.h"

#include <atomic>

namespace moesim::sim {

uint64_t next_state_version() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace moesim::sim

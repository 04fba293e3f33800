// One row of a request trace, as read from the file (before windowing and rate scaling).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.h"

namespace moesim::sim {

struct TraceRecord {
  // Arrival time relative to the trace's time origin (Mooncake: its own 0; Azure: first row).
  SimTime timestamp_ns = 0;
  int64_t input_tokens = 0;   // >= 1
  int64_t output_tokens = 0;  // >= 1
  // Prefix-block hashes (Mooncake hash_ids, one per 512-token block); empty for Azure rows.
  std::vector<uint64_t> hash_ids;
  // 1-based line in the file, for messages.
  int32_t line = 0;
};

}  // namespace moesim::sim

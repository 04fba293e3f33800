// Reader for the request trace (`moesim.request_trace.v1`, docs/schemas/request_trace.md) that
// `moesim run --export-requests` writes, for a [workload] of kind "request_trace": the same
// arrivals re-simulated on the scenario's deployment (the header's deployment is not applied;
// only its model name is kept, so that the scenario can check it runs the model the trace was
// made for).
//
// Strict, like the other trace readers: line 1 is the header (record "header", the schema
// above, a model name); every further line one request record with only the documented keys.
// Every malformed line raises ConfigError "FILE:LINE: KEY: REASON"; no row is skipped. The file
// is read through the bounded input reader (base/input_file.h).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "sim/core/time.h"
#include "sim/workload/request.h"

namespace moesim::sim {

struct RequestTraceRow {
  int32_t request_id = 0;  // unique in the file
  SimTime arrival_ns = 0;  // non-decreasing from row to row
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int32_t session_id = -1;  // -1: not part of a session
  int32_t turn_idx = 0;
  Domain domain = Domain::kChat;
  bool has_prefix_blocks = false;
  std::vector<uint64_t> prefix_blocks;  // num_prefix_blocks(prompt_tokens) of them when given
  int32_t line = 0;                     // 1-based line in the file, for messages
};

struct RequestTraceFile {
  std::string model_name;  // the header's model.name
  std::vector<RequestTraceRow> rows;
  // One more than the largest prefix-block hash of any row (0 when none): fresh hashes for rows
  // without prefix_blocks start here.
  uint64_t hash_bound = 0;
};

// Reads the whole file. A file that cannot be opened, or has no header, is a ConfigError.
RequestTraceFile read_request_trace(const std::string& path);
// Reads from a stream; `name` stands for the file in error messages.
RequestTraceFile read_request_trace(std::istream& in, const std::string& name);

}  // namespace moesim::sim

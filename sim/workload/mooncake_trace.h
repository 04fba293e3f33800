// Reader for Mooncake traces (github.com/kvcache-ai/Mooncake, FAST'25 release): JSON Lines,
// one request per line:
//   {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, ...]}
// timestamp: arrival in milliseconds (number >= 0, non-decreasing from row to row);
// input_length, output_length: integers >= 1; hash_ids: integers >= 0, exactly
// ceil(input_length / 512) of them. Other keys are ignored.
//
// Every malformed line raises ConfigError "FILE:LINE[:COL]: [KEY: ]REASON"; no row is skipped.
// Empty lines are errors too; a final newline is optional.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "sim/workload/trace_record.h"

namespace moesim::sim {

// Reads the whole file. A file that cannot be opened or has no rows is a ConfigError.
std::vector<TraceRecord> read_mooncake_trace(const std::string& path);
// Reads from a stream; `name` stands for the file in error messages.
std::vector<TraceRecord> read_mooncake_trace(std::istream& in, const std::string& name);

}  // namespace moesim::sim

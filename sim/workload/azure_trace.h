// Reader for the Azure LLM inference traces (github.com/Azure/AzurePublicDataset, 2023 and
// 2024 releases): CSV with the header line
//   TIMESTAMP,ContextTokens,GeneratedTokens
// and rows such as "2023-11-16 18:17:03.9799600,4808,10". TIMESTAMP is
// "YYYY-MM-DD HH:MM:SS[.fraction]" with 1 to 9 fraction digits, non-decreasing from row to row;
// arrival times are taken relative to the first row. ContextTokens and GeneratedTokens are
// integers >= 1.
//
// Every malformed line raises ConfigError "FILE:LINE:COL: [KEY: ]REASON", COL being the field's
// first character; no row is skipped. Empty lines are errors; a final newline is optional.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/workload/trace_record.h"

namespace moesim::sim {

// Reads the whole file. A file that cannot be opened or has no rows is a ConfigError.
std::vector<TraceRecord> read_azure_trace(const std::string& path);
// Reads from a stream; `name` stands for the file in error messages.
std::vector<TraceRecord> read_azure_trace(std::istream& in, const std::string& name);

// Parses "YYYY-MM-DD HH:MM:SS[.fraction]" (UTC, proleptic Gregorian) to nanoseconds since
// 1970-01-01; nullopt when malformed or out of range.
std::optional<int64_t> parse_datetime_ns(std::string_view text);

}  // namespace moesim::sim

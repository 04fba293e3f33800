// moesim-engine's command line, split and checked before any work: the command (replay or
// bench), replay's STEPS.jsonl, and "--flag VALUE" pairs, each flag known and given to the
// command it belongs to, every number read by base/number_text.h (int64 range, finite values)
// and held to its domain ("--warmup 99999999999" ran 1.2e9 warm-ups; "--contexts 2^62" was
// reported as out of device memory). main.cc reads the typed values through the accessors;
// tests/fuzz/cli_args_fuzz.cc feeds argv vectors to parse_engine_args() alone.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/input_error.h"

namespace moesim::engine {

// A bad command line: moesim-engine prints it with a pointer to --help and exits with 2.
class UsageError : public InputError {
 public:
  using InputError::InputError;
};

// Domains of the numeric flags (docs/engine.md, "Command line").
inline constexpr int64_t kMaxEngineRuns = 1000000;           // --warmup, --repeats
inline constexpr double kMaxWaitFraction = 1e6;              // --max-wait-fraction
inline constexpr double kMaxMemoryLimitGib = 1e6;            // --memory-limit-gib: about 1 PB
inline constexpr double kMaxPeakTflops = 1e6;                // --peak-*-tflops: 1 EFLOP/s
inline constexpr double kMaxPeakGbps = 1e6;                  // --peak-gbps: 1 PB/s
inline constexpr double kMaxServeWallSeconds = 1e6;          // --max-wall-s: 11.6 days
inline constexpr int64_t kMaxEngineGpus = int64_t{1} << 20;  // GPU ids, ranks, replicas
inline constexpr int64_t kMaxBenchTokens = int64_t{1} << 24;
inline constexpr int64_t kMaxBenchContextTokens = INT32_MAX;  // tokens + context fit int32

struct EngineArgs {
  std::string command;     // "replay", "bench" or "serve"
  std::string trace_path;  // replay's STEPS.jsonl, serve's REQUESTS.jsonl
  std::map<std::string, std::string> flags;

  bool has(const std::string& flag) const { return flags.count(flag) > 0; }
  std::string get(const std::string& flag, const std::string& fallback) const;
};

// Splits and checks `argv` (the arguments after the program name): throws UsageError for an
// unknown flag, a flag without its value, a flag of the other command, a missing command or
// argument, and any numeric value outside its domain.
EngineArgs parse_engine_args(const std::vector<std::string>& argv);

// The value of an integer flag of `a` (`fallback` when absent), in [min_value, max_value].
int64_t int_flag(const EngineArgs& a, const std::string& flag, int64_t fallback, int64_t min_value,
                 int64_t max_value);
// The comma-separated integers of a list flag (`fallback` text when absent), each in
// [min_value, max_value].
std::vector<int64_t> int_list_flag(const EngineArgs& a, const std::string& flag,
                                   const std::string& fallback, int64_t min_value,
                                   int64_t max_value);
// The value of a positive number flag, in (0, max_value]; std::nullopt when absent.
std::optional<double> positive_flag(const EngineArgs& a, const std::string& flag, double max_value);

}  // namespace moesim::engine

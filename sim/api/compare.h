// `moesim compare A B`: both scenarios under common random numbers, the paired differences B - A
// with bootstrap intervals (sim/study/compare.h).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "sim/api/load.h"
#include "sim/study/compare.h"

namespace moesim::sim::api {

struct CompareRequest {
  ScenarioSource a, b;          // each side with its drops (--drop-a) and overrides (--set-a)
  std::optional<int64_t> seed;  // root seed, >= 0 (default: A's [run] seed)
  std::optional<int64_t> replications;             // 1..100000 (default 1)
  std::optional<int64_t> resamples;                // 1..10000000 (default 1000)
  std::optional<double> confidence;                // in (0, 1) (default 0.95)
  std::optional<double> duration_s;                // of both, in [1e-6, 1e7] (default: each [run])
  std::optional<int64_t> threads;                  // 1..4096 (default: hardware threads)
  std::function<void(int64_t, int64_t)> progress;  // (runs done, runs in all)
};

struct CompareReport {
  std::string name_a, name_b;        // the files (or held scenarios' names)
  std::string changes_a, changes_b;  // "without policies; scheduler.max_seqs=64", or ""
  study::CompareOptions options;     // as used
  study::CompareResult result;

  int exit_code() const { return result.conservation_ok ? 0 : 1; }
};

CompareReport compare(const CompareRequest& request);

// `moesim compare --json`'s document.
nlohmann::json compare_json(const CompareReport& report);
// The table: A, B, B - A, B/A - 1 and the interval per metric, policy action and mechanism.
void write_compare_text(std::ostream& os, const CompareReport& report);

}  // namespace moesim::sim::api

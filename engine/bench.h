// `moesim-engine bench`: each operation swept over token counts and context lengths on
// synthetic weights of a built-in layer shape, reporting time, achieved FLOP/s and bytes/s
// (from engine/op_cost.h) next to the device's peak figures (n/a when unknown).
//
// Shapes: "tiny" (the test model: hidden 256; default on the CPU) or "dsv3" (DeepSeek-V3-sized:
// hidden 7168, MLA 128 heads, 8 local experts of 2048, GQA 64/8 x 128 and KDA 32 x 128 x 128
// at the same width; default on devices).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "engine/backend.h"

namespace moesim::engine {

struct BenchOptions {
  std::string shapes;             // "tiny" or "dsv3"
  std::vector<int64_t> tokens;    // token counts (decode: sequences)
  std::vector<int64_t> contexts;  // context lengths for attention ops
  int warmup = 1;
  int repeats = 3;
  DevicePeaks peaks;  // what to print beside achieved rates
  std::string engine_version;
};

// Runs the sweep; writes a human-readable table to `table` and, when `jsonl` is not null, a
// measurement header (mode "bench") and one "bench" record per point to `jsonl`. Throws
// InputError for unknown shapes or empty sweeps.
void run_bench(Backend& backend, const BenchOptions& options, std::ostream& table,
               std::ostream* jsonl);

}  // namespace moesim::engine

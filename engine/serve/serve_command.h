// `moesim-engine serve REQUESTS.jsonl --out DIR`: reads a request trace (docs/schemas/
// request_trace.md), serves it (engine/serve/serve_loop.h) and writes DIR/steps.jsonl,
// DIR/requests.csv and, last, DIR/summary.json (its presence marks a complete run). Each file
// is written under a temporary name and renamed into place, so a failed or interrupted run never
// leaves a file that looks complete.
#pragma once

#include <functional>
#include <memory>
#include <ostream>

#include "engine/backend.h"
#include "engine/options.h"

namespace moesim::engine::serve {

// Creates one rank's backend when `num_ranks` ranks share this process.
using CommandBackendFactory = std::function<std::unique_ptr<Backend>(int num_ranks)>;

// Runs the command; prints one summary line to `out`. Returns the exit code (0, or 1 when an
// output could not be written, the path and errno's reason printed to stderr). Throws
// InputError / UsageError for bad input (exit 2), OutOfMemoryError and backend errors (exit 1).
int run_serve_command(const EngineArgs& args, const CommandBackendFactory& make_backend,
                      std::ostream& out);

}  // namespace moesim::engine::serve

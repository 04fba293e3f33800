// `moesim trace-fit TRACE`: the workload model fitted to a trace window and its goodness of fit
// (sim/api/trace_fit.h).
#include <iostream>

#include "apps/moesim/cli.h"
#include "sim/api/trace_fit.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Fits the model that [workload] replay = \"model\" draws from to a window of a Mooncake\n"
    "(.jsonl) or Azure (.csv) trace, and prints its parameters and goodness of fit: two-sample\n"
    "Kolmogorov-Smirnov distances of inter-arrival gaps, prompt and output lengths between the\n"
    "window and the model's requests at the window's rate, the gaps' cv and lag-1\n"
    "autocorrelation, the ln prompt / ln output correlation, and the prefix-block hit rate of an\n"
    "unbounded cache (Mooncake), also for replay = \"loop\" (docs/workload.md).";

}  // namespace

int trace_fit_command(const std::vector<std::string>& argv) {
  sim::api::TraceFitRequest request;
  std::optional<int64_t> seed;
  std::optional<double> start_s;
  bool json = false;
  CommandLine cl("trace-fit TRACE [options]", kDescription);
  cl.positional("TRACE", &request.path, "a Mooncake JSONL or Azure CSV trace")
      .option("--kind", &request.kind, "KIND", "mooncake or azure (default: by extension)")
      .option("--start-s", &start_s, "S", "window start in trace time (default 0)")
      .option("--end-s", &request.end_s, "S", "window end in trace time (default: the trace's)")
      .option("--max-requests", &request.max_requests, "N", "the window's first N rows")
      .option("--seed", &seed, "N", "seed of the model's sample (default 1)")
      .flag("--json", &json, "one JSON document");
  if (!cl.parse(argv)) return 0;
  if (start_s) request.start_s = *start_s;
  if (seed) {
    if (*seed < 0) throw UsageError{"--seed must be >= 0"};
    request.seed = static_cast<uint64_t>(*seed);
  }
  const sim::api::TraceFitResult result = sim::api::trace_fit(request);
  if (json) {
    std::cout << sim::api::trace_fit_json(result).dump(2) << "\n";
  } else {
    sim::api::write_trace_fit_text(std::cout, result);
  }
  return 0;
}

}  // namespace moesim::cli

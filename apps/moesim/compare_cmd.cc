// `moesim compare A.toml B.toml`: runs both scenarios with the same seeds (common random
// numbers) and prints the paired differences B - A with bootstrap confidence intervals
// (sim/api/compare.h, sim/study/compare.h).
#include <iostream>

#include "apps/moesim/cli.h"
#include "apps/moesim/progress.h"
#include "sim/api/compare.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Runs A and B with the same root seed (common random numbers) and prints A, B, B - A and\n"
    "B/A - 1 with units for TTFT/TPOT p50/p99, throughput, goodput, SLO attainment and policy\n"
    "action counts, with percentile-bootstrap confidence intervals of B - A.";

std::vector<sim::study::Override> overrides(const std::vector<std::string>& texts,
                                            const std::string& option) {
  std::vector<sim::study::Override> out;
  for (const std::string& text : texts) out.push_back(sim::study::parse_override(text, option));
  return out;
}

}  // namespace

int compare_command(const std::vector<std::string>& argv) {
  sim::api::CompareRequest request;
  std::vector<std::string> set_a, set_b;
  bool json = false, progress = false;
  CommandLine cl("compare A.toml B.toml [options]", kDescription);
  cl.positional("A.toml", &request.a.path, "scenario A")
      .positional("B.toml", &request.b.path, "scenario B")
      .option("--seed", &request.seed, "N", "root seed (default: A's [run] seed)")
      .option("--replications", &request.replications, "N",
              "1 (default): one run each, resample matched requests; N >= 2: seeds "
              "seed..seed+N-1, resample replications (sound under queueing correlation; prefer "
              "N >= 10)")
      .option("--resamples", &request.resamples, "N", "bootstrap resamples (default 1000)")
      .option("--confidence", &request.confidence, "C", "interval level in (0, 1) (default 0.95)")
      .option("--duration", &request.duration_s, "SECONDS",
              "simulated time of both (default: each scenario's [run] duration_s)")
      .option("--threads", &request.threads, "N",
              "runs in parallel (default: the machine's hardware threads)")
      .option("--set-a", &set_a, "KEY.PATH=VALUE",
              "override a key of A (repeatable; as moesim run --set)")
      .option("--set-b", &set_b, "KEY.PATH=VALUE", "override a key of B (repeatable)")
      .option("--drop-a", &request.a.dropped, "KEY.PATH",
              "remove a key or table from A (repeatable), e.g. the policy under study: moesim "
              "compare S.toml S.toml --drop-a policies")
      .option("--drop-b", &request.b.dropped, "KEY.PATH",
              "remove a key or table from B (repeatable)")
      .flag("--json", &json, "print the comparison as one JSON document")
      .flag("--progress", &progress,
            "runs done and time left on stderr even when it is not a terminal")
      .footer("exit codes: 0 success, 1 a run broke conservation, 2 bad input");
  if (!cl.parse(argv)) return 0;
  request.a.overrides = overrides(set_a, "--set-a");
  request.b.overrides = overrides(set_b, "--set-b");
  Progress bar = Progress::for_stderr("compare", "runs", progress);
  request.progress = bar.callback();
  const sim::api::CompareReport report = sim::api::compare(request);
  if (json) {
    std::cout << sim::api::compare_json(report).dump(2) << "\n";
  } else {
    sim::api::write_compare_text(std::cout, report);
  }
  return report.exit_code();
}

}  // namespace moesim::cli

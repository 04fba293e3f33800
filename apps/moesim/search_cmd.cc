// `moesim search SCENARIO --slo ...`: for each configuration of a grid, the highest request rate
// that meets the SLOs (binary search on the rate multiplier, sim/api/search.h), and the cheapest
// configuration (fewest GPUs) that sustains --target-rate. Under `mpirun -np N` the ranks search
// the configurations and rank 0 prints the result (mpi_world.h).
#include <cstdio>
#include <iostream>

#include "apps/moesim/cli.h"
#include "apps/moesim/mpi_world.h"
#include "apps/moesim/progress.h"
#include "sim/api/search.h"
#include "sim/config/config_error.h"
#include "sim/io/output_files.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Finds, for each configuration, the highest rate at which SCENARIO meets the SLOs, by scaling\n"
    "the workload's rate (arrival.rate_per_s, or rate_multiplier for traces) with a multiplier:\n"
    "1, then doubling or halving, then geometric bisection. Assumes that meeting the SLOs is\n"
    "monotone in the rate. Before probing, each configuration is diagnosed: the requests that can\n"
    "never meet a limit (isolated prefill vs the TTFT limit, isolated decode vs TPOT, a sequence\n"
    "that cannot fit the KV pool); one that is infeasible at any rate says so and is not probed.\n"
    "Under mpirun -np N: rank r searches configurations r, r+N, ...; rank 0 prints the result.";

void declare_search(CommandLine& cl, sim::api::SearchRequest& r) {
  cl.option("--slo", &r.slo, "LIMITS",
            "comma-separated NAME=VALUE: percentile limits {ttft,tpot,e2e,queueing}_{p50,p90,"
            "p99}_ms, per-request limits for the attainment ttft_ms, tpot_ms (default: the "
            "scenario's [slo]), e.g. ttft_p99_ms=2000,tpot_p99_ms=100 (required)")
      .option("--grid", &r.grid_path, "SWEEP.toml",
              "search every configuration of the sweep file's [[parameters]] grid, applied to "
              "SCENARIO (its scenario key and seeds are not used)")
      .option("--target-rate", &r.target_rate_per_s, "R",
              "name the configuration with the fewest GPUs sustaining R per second")
      .option("--min-attainment", &r.min_attainment, "A",
              "fraction of decided requests within the per-request limits (default 0.99)")
      .option("--seed", &r.seed, "N",
              "root seed of every probe (default: the scenario's [run] seed)")
      .option("--tolerance", &r.tolerance, "T",
              "stop when the bracket hi / lo <= 1 + T (default 0.02)")
      .option("--max-doublings", &r.max_doublings, "K",
              "bracket multipliers within 2^-K .. 2^K (default 10)")
      .option("--replications", &r.replications, "N",
              "search each configuration with N seeds (seed, seed + 1, ...) for the interval on "
              "its max rate (default 3; 1: no interval)")
      .option("--max-duration-factor", &r.max_duration_factor, "F",
              "a probe whose measured window has not converged by run.duration_s runs on, up to "
              "F times it (default 5; 1: never; docs/outputs.md, \"Steady state\")")
      .option("--threads", &r.threads, "N",
              "threads (default: hardware threads): configurations are searched in parallel, and "
              "spare threads run a configuration's next probes speculatively; the result is the "
              "same for every N");
}

void declare_outputs(CommandLine& cl, sim::api::SearchRequest& r) {
  cl.option("--journal", &r.journal_path, "FILE",
            "record each searched configuration in FILE as it completes (fsync'd)")
      .flag("--resume", &r.resume,
            "take the configurations FILE holds (a killed search) instead of searching them "
            "again; the output is an uninterrupted run's")
      .option("--gpu-price-per-hour", &r.gpu_price_per_hour, "USD",
              "price of one GPU-hour for the cost figures (default: the topology's [gpu] "
              "price_usd_per_hour; none: GPU-hours only)")
      .option("--plan", &r.plan_path, "FILE.csv|FILE.json",
              "write the planner's table (per configuration at its max rate: tokens/s per GPU, "
              "cost per million tokens, feasible, pareto, cheapest) as CSV or JSON by the file's "
              "extension")
      .flag("--probe-infeasible", &r.probe_infeasible,
            "probe configurations the diagnosis finds infeasible at any rate too")
      .flag("--full-probes", &r.full_probes,
            "run every probe to its end; by default a probe stops once its verdict fails "
            "whatever the rest of the run does (the same decisions; the failing probe's figures "
            "are those of the part it ran)");
}

int run_search_command(const std::vector<std::string>& argv, const MpiWorld& world) {
  sim::api::SearchRequest request;
  bool json = false, progress = false;
  CommandLine cl("search SCENARIO --slo LIMITS [options]", kDescription);
  cl.positional("SCENARIO", &request.scenario_path, "a scenario file");
  declare_search(cl, request);
  declare_outputs(cl, request);
  cl.flag("--progress", &progress, "progress bar on stderr even when it is not a terminal")
      .flag("--json", &json, "print every probe as one JSON document")
      .footer("exit codes: 0 success, 2 bad input");
  if (!cl.parse(argv)) return 0;
  Progress bar = world.rank() == 0 ? Progress::for_stderr("search", "configurations", progress)
                                   : Progress("search", "configurations", false, false);
  request.progress = bar.callback();
  request.ranks = &world;
  const sim::api::SearchReport report = sim::api::search(request);
  if (report.num_resumed > 0) {
    std::fprintf(stderr, "search: resumed %zu configurations from %s\n", report.num_resumed,
                 report.journal_path->c_str());
  }
  if (!report.is_root) return 0;
  if (json) {
    std::cout << sim::api::search_json(report).dump(2) << "\n";
  } else {
    sim::api::write_search_text(std::cout, report);
  }
  return 0;
}

}  // namespace

int search_command(const std::vector<std::string>& argv) {
  const MpiWorld world;
  if (!world.active()) return run_search_command(argv, world);
  // A rank that fails on its own ends the whole job (the others would wait in the gather).
  auto fail = [&](const std::string& message, int code) {
    std::fprintf(stderr, "moesim search (rank %d of %d): %s\n", world.rank(), world.size(),
                 message.c_str());
    world.abort(code);
  };
  int code = 0;
  try {
    code = run_search_command(argv, world);
  } catch (const sim::ConfigError& e) {
    fail(std::string("error: ") + e.what(), sim::kExitBadInput);
  } catch (const sim::io::OutputError& e) {
    fail(std::string("error: ") + e.what(), sim::io::kExitOutputFailed);
  } catch (const UsageError& e) {
    fail(e.message + " (see moesim search --help)", sim::kExitBadInput);
  }
  return static_cast<int>(world.max(code));
}

}  // namespace moesim::cli

// `moesim sweep SWEEP.toml`: runs a parameter grid (docs/sweeps.md, sim/api/sweep.h) on a pool of
// threads and writes one CSV row per run, in grid order. `moesim sweep merge OUT.csv SHARD.csv...`
// joins the CSVs of a sweep split with --shard K/N; `moesim sweep plan SWEEP.csv` prints the
// planner's table of a finished sweep. Under `mpirun -np N` the ranks take the shards and rank 0
// writes the merged CSV (mpi_world.h).
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "apps/moesim/mpi_world.h"
#include "apps/moesim/progress.h"
#include "sim/api/sweep.h"
#include "sim/config/config_error.h"
#include "sim/io/output_files.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Runs every (configuration, seed) of a sweep file (docs/sweeps.md) and writes one CSV row per\n"
    "run in grid order; the bytes do not depend on the thread count. At the end it prints the\n"
    "planner's summary on stderr: the feasible configurations, the Pareto frontier (cost per\n"
    "million output tokens, TTFT p99, TPOT p99) and the cheapest feasible configuration.\n"
    "The CSV grows in FILE.csv.partial, one fsync'd row per finished run, and is renamed to\n"
    "FILE.csv when complete; --resume goes on from the rows of an interrupted sweep (without\n"
    "it, a FILE.csv.partial that holds finished rows is refused). Under mpirun -np N: rank r\n"
    "runs shard r+1/N and rank 0 writes the whole CSV (same bytes).\n"
    "  moesim sweep merge OUT.csv SHARD.csv...   joins shard CSVs (same header; every run\n"
    "                                            exactly once) into OUT.csv in grid order\n"
    "  moesim sweep plan SWEEP.csv [--plan FILE] the planner's summary (stdout) and table of a\n"
    "                                            finished sweep's CSV";

constexpr const char* kFooter =
    "exit codes: 0 success (runs that failed to parse or fit are rows with status=error),\n"
    "            1 a run broke conservation or the CSV could not be written, 2 bad input";

int merge_command(const std::vector<std::string>& argv) {
  std::vector<std::string> paths;
  CommandLine cl("sweep merge OUT.csv SHARD.csv...",
                 "Joins the CSVs of a sweep split with --shard K/N into the CSV of the whole "
                 "sweep,\nin grid order (same header; every run exactly once).");
  cl.positionals("OUT.csv SHARD.csv...", &paths, "the merged CSV, then the shards' CSVs");
  if (!cl.parse(argv)) return 0;
  if (paths.empty()) throw UsageError{"missing argument: OUT.csv"};
  if (paths.size() < 2) throw UsageError{"missing argument: SHARD.csv"};
  const std::vector<std::string> inputs(paths.begin() + 1, paths.end());
  sim::api::sweep_merge(inputs, paths[0]);
  std::fprintf(stderr, "sweep merge: %zu files -> %s\n", inputs.size(), paths[0].c_str());
  return 0;
}

int plan_command(const std::vector<std::string>& argv) {
  std::string csv_path;
  std::optional<std::string> plan_path;
  CommandLine cl("sweep plan SWEEP.csv [options]",
                 "The planner's summary (stdout) and table (--plan) of a finished sweep's CSV.");
  cl.positional("SWEEP.csv", &csv_path, "a whole sweep's CSV")
      .option("--plan", &plan_path, "FILE.csv|FILE.json",
              "write the planner's table, one row per configuration, as CSV or JSON by the "
              "file's extension");
  if (!cl.parse(argv)) return 0;
  const sim::study::Plan plan = sim::api::sweep_plan(csv_path, plan_path);
  std::ostringstream text;
  sim::api::write_sweep_plan_summary(text, plan, plan_path);
  std::fputs(text.str().c_str(), stdout);
  return 0;
}

// The sweep itself, on this process or on the ranks of an MPI job (mpi_world.h).
int run_sweep_command(const std::vector<std::string>& argv, const MpiWorld& world) {
  sim::api::SweepRequest request;
  bool progress = false;
  CommandLine cl("sweep SWEEP.toml [options]", kDescription);
  cl.positional("SWEEP.toml", &request.sweep_path, "a sweep file (sweeps/*.toml)")
      .option("-o,--out", &request.out_path, "FILE.csv", "write the CSV here (default: stdout)")
      .option("--threads", &request.threads, "N",
              "runs in parallel (default: the machine's hardware threads)")
      .option("--shard", &request.shard, "K/N",
              "run only the runs with run_idx % N == K - 1 (K in 1..N)")
      .flag("--resume", &request.resume,
            "go on from FILE.csv.partial, the rows a killed sweep completed")
      .option("--slo", &request.slo, "LIMITS",
              "what the feasible column requires: percentile limits "
              "{ttft,tpot,e2e,queueing}_{p50,p90,p99}_ms=MS and attainment=A, as for moesim "
              "search (per-request limits: each configuration's [slo])")
      .option("--min-attainment", &request.min_attainment, "A",
              "met / decided requests under [slo] for feasible (default 0.99)")
      .option("--gpu-price-per-hour", &request.gpu_price_per_hour, "USD",
              "price of one GPU-hour for the cost columns (default: the topology's [gpu] "
              "price_usd_per_hour; none: dollar cells stay empty)")
      .option("--plan", &request.plan_path, "FILE.csv|FILE.json",
              "write the planner's table, one row per configuration (feasible, pareto, "
              "cheapest), as CSV or JSON by the file's extension")
      .option("--max-duration-factor", &request.max_duration_factor, "F",
              "a run whose measured window has not converged by run.duration_s runs on, up to "
              "F times it (default 5; 1: never; docs/outputs.md, \"Steady state\")")
      .flag("--progress", &progress,
            "draw the progress bar on stderr even when it is not a terminal")
      .footer(kFooter);
  if (!cl.parse(argv)) return 0;
  // Rank 0 draws its own shard's runs; resumed rows count as done but not in the rate.
  Progress bar = world.rank() == 0 ? Progress::for_stderr("sweep", "runs", progress)
                                   : Progress("sweep", "runs", false, false);
  if (bar.enabled()) {
    request.progress = [&bar](int64_t done, int64_t total, int64_t resumed) {
      bar.set_resumed(resumed);
      bar.update(done + resumed, total + resumed);
    };
  }
  request.csv = &std::cout;
  request.ranks = &world;
  const sim::api::SweepReport report = sim::api::sweep(request);
  if (!report.is_root) return report.exit_code();
  std::ostringstream summary;
  sim::api::write_sweep_summary(summary, report);
  std::fputs(summary.str().c_str(), stderr);
  return report.exit_code();
}

}  // namespace

int sweep_command(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "merge") {
    return merge_command(std::vector<std::string>(argv.begin() + 1, argv.end()));
  }
  if (!argv.empty() && argv[0] == "plan") {
    return plan_command(std::vector<std::string>(argv.begin() + 1, argv.end()));
  }
  const MpiWorld world;
  if (!world.active()) return run_sweep_command(argv, world);
  // A rank that fails on its own would leave the others waiting in a collective: it reports and
  // ends the whole job with its exit code.
  auto fail = [&](const std::string& message, int code) {
    std::fprintf(stderr, "moesim sweep (rank %d of %d): %s\n", world.rank(), world.size(),
                 message.c_str());
    world.abort(code);
  };
  int code = 0;
  try {
    code = run_sweep_command(argv, world);
  } catch (const sim::ConfigError& e) {
    fail(std::string("error: ") + e.what(), sim::kExitBadInput);
  } catch (const sim::io::OutputError& e) {
    fail(std::string("error: ") + e.what(), sim::io::kExitOutputFailed);
  } catch (const UsageError& e) {
    fail(e.message + " (see moesim sweep --help)", sim::kExitBadInput);
  }
  // Every rank ends with the job's worst status.
  return static_cast<int>(world.max(code));
}

}  // namespace moesim::cli

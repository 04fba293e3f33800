// `moesim sweep SWEEP.toml`: runs a parameter grid (docs/sweeps.md) on a pool of threads and
// writes one CSV row per run, in grid order. `moesim sweep merge OUT.csv SHARD.csv...` joins the
// CSVs of a sweep split with --shard K/N (a job array) into the CSV of the whole sweep. Under
// `mpirun -np N` the ranks take the shards and rank 0 writes the merged CSV (mpi_world.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "apps/moesim/mpi_world.h"
#include "apps/moesim/plan_options.h"
#include "apps/moesim/progress.h"
#include "sim/config/config_error.h"
#include "sim/io/output_files.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/sweep.h"
#include "sim/study/sweep_merge.h"
#include "sim/study/sweep_plan.h"

namespace moesim::cli {
namespace {

constexpr const char* kUsage =
    "usage: moesim sweep SWEEP.toml [--out FILE.csv [--resume]] [--threads N] [--shard K/N]\n"
    "                   [--slo LIMITS] [--min-attainment A] [--gpu-price-per-hour USD]\n"
    "                   [--plan FILE.csv|FILE.json] [--progress]\n"
    "       moesim sweep merge OUT.csv SHARD.csv...\n"
    "       moesim sweep plan SWEEP.csv [--plan FILE.csv|FILE.json]\n\n"
    "Runs every (configuration, seed) of a sweep file (docs/sweeps.md) and writes one CSV row per\n"
    "run in grid order; the bytes do not depend on the thread count. At the end it prints the\n"
    "planner's summary on stderr: the feasible configurations, the Pareto frontier (cost per\n"
    "million output tokens, TTFT p99, TPOT p99) and the cheapest feasible configuration.\n"
    "  --out FILE.csv   write the CSV here (default: stdout)\n"
    "  --threads N      runs in parallel (default: the machine's hardware threads)\n"
    "  --shard K/N      run only the runs with run_idx % N == K - 1 (K in 1..N)\n"
    "  --resume         go on from FILE.csv.partial, the rows a killed sweep completed\n"
    "  --slo LIMITS     what the feasible column requires: percentile limits\n"
    "                   {ttft,tpot,e2e,queueing}_{p50,p90,p99}_ms=MS and attainment=A, as for\n"
    "                   moesim search (per-request limits: each configuration's [slo])\n"
    "  --min-attainment A  met / decided requests under [slo] for feasible (default 0.99)\n"
    "  --gpu-price-per-hour USD  price of one GPU-hour for the cost columns (default: the\n"
    "                   topology's [gpu] price_usd_per_hour; none: dollar cells stay empty)\n"
    "  --plan FILE      write the planner's table, one row per configuration (feasible, pareto,\n"
    "                   cheapest), as CSV or JSON by the file's extension\n"
    "  --progress       draw the progress bar on stderr even when it is not a terminal\n"
    "under mpirun -np N: rank r runs shard r+1/N and rank 0 writes the whole CSV (same bytes).\n"
    "merge: joins shard CSVs (same header; every run exactly once) into OUT.csv in grid order.\n"
    "plan: the planner's summary (stdout) and table (--plan) of a finished sweep's CSV.\n"
    "exit codes: 0 success (runs that failed to parse or fit are rows with status=error),\n"
    "            1 a run broke conservation or the CSV could not be written, 2 bad input\n"
    "the CSV grows in FILE.csv.partial, one fsync'd row per finished run, and is renamed to\n"
    "FILE.csv when complete\n";

int merge_command(const std::vector<std::string>& argv) {
  Args args(argv, {});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  args.finish(args.positionals().size());
  const std::string& out_path = args.positional(0, "OUT.csv");
  args.positional(1, "SHARD.csv");
  std::vector<std::string> inputs(args.positionals().begin() + 1, args.positionals().end());
  sim::io::check_output_file(out_path, "OUT.csv");
  std::ostringstream merged;
  sim::study::merge_sweep_csvs(inputs, merged);
  sim::io::write_file_atomically(out_path, [&](std::ostream& os) { os << merged.str(); });
  std::fprintf(stderr, "sweep merge: %zu files -> %s\n", inputs.size(), out_path.c_str());
  return 0;
}

// Forwards everything written to `sink` and keeps a copy (the CSV the planner reads back);
// flushes reach the sink (the journal's fsync per row).
class CopyingBuf final : public std::streambuf {
 public:
  CopyingBuf(std::streambuf* sink, std::string* copy) : sink_(sink), copy_(copy) {}

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    copy_->push_back(static_cast<char>(c));
    return sink_->sputc(static_cast<char>(c));
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    copy_->append(s, static_cast<size_t>(n));
    return sink_->sputn(s, n);
  }
  int sync() override { return sink_->pubsync(); }

 private:
  std::streambuf* sink_;
  std::string* copy_;
};

// The planner's table of a whole sweep's CSV: the summary on `summary`, the table in --plan.
void report_plan(const std::string& csv, const std::string& name,
                 const std::optional<std::string>& plan_path, std::FILE* summary) {
  std::istringstream in(csv);
  const sim::study::Plan plan = sim::study::plan_from_sweep_csv(in, name);
  std::fprintf(summary, "sweep plan:\n%s", sim::study::plan_summary_text(plan).c_str());
  if (plan_path) {
    write_plan_file(plan, *plan_path);
    std::fprintf(summary, "  plan -> %s\n", plan_path->c_str());
  }
}

int plan_command(const std::vector<std::string>& argv) {
  Args args(argv, {"--plan"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& csv_path = args.positional(0, "SWEEP.csv");
  const std::optional<std::string> plan_path = plan_option(args);
  args.finish(1);
  std::ifstream in(csv_path, std::ios::binary);
  if (!in) throw sim::ConfigError(csv_path, 0, 0, "", "cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  report_plan(text.str(), csv_path, plan_path, stdout);
  return 0;
}

// The sweep itself, on this process or on the ranks of an MPI job (mpi_world.h).
int run_sweep_command(const std::vector<std::string>& argv, const MpiWorld& world) {
  Args args(argv, {"--out", "--threads", "--shard", "--slo", "--min-attainment",
                   "--gpu-price-per-hour", "--plan"});
  if (args.help_requested()) {
    if (world.rank() == 0) std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& path = args.positional(0, "SWEEP.toml");
  auto out_path = args.value("--out");
  auto threads = args.int_value("--threads");
  auto shard = args.value("--shard");
  const bool progress_asked = args.flag("--progress");
  const bool resume = args.flag("--resume");
  auto slo_text = args.value("--slo");
  auto min_attainment = args.double_value("--min-attainment");
  const std::optional<double> price = gpu_price_option(args);
  const std::optional<std::string> plan_path =
      world.rank() == 0 ? plan_option(args) : args.value("--plan");
  args.finish(1);
  if (plan_path && shard) {
    throw UsageError{"--plan needs the whole sweep: run moesim sweep plan on the merged CSV"};
  }
  if (min_attainment && !(*min_attainment >= 0 && *min_attainment <= 1)) {
    throw UsageError{"--min-attainment must be in [0, 1]"};
  }
  sim::study::SweepPlanner planner;
  planner.gpu_price_per_hour = price;
  if (slo_text) {
    planner.limits = sim::study::parse_search_slo(*slo_text);
    if (planner.limits.request_ttft_ms || planner.limits.request_tpot_ms) {
      throw sim::ConfigError("--slo", 0, 0, planner.limits.request_ttft_ms ? "ttft_ms" : "tpot_ms",
                             "a sweep's per-request limits are each scenario's [slo] ttft_ms / "
                             "tpot_ms (sweep slo.ttft_ms as a parameter to vary them)");
    }
  }
  if (min_attainment) planner.limits.min_attainment = *min_attainment;
  if (resume && !out_path) throw UsageError{"--resume needs --out FILE.csv"};
  if (resume && world.active()) throw UsageError{"--resume cannot be combined with mpirun"};
  if (threads && (*threads < 1 || *threads > 4096))
    throw UsageError{"--threads must be in 1..4096"};
  if (shard && world.active()) {
    throw UsageError{"--shard cannot be combined with mpirun (the ranks shard the sweep)"};
  }

  sim::study::SweepSpec spec = sim::study::load_sweep(path);
  sim::study::ScenarioTemplate scenario = sim::study::ScenarioTemplate::load(spec.scenario_path);
  sim::study::check_sweep(spec, scenario);
  sim::study::SweepOptions options;
  options.num_threads =
      threads ? static_cast<int32_t>(*threads) : sim::study::default_num_threads();
  if (shard) options.shard = sim::study::parse_shard(*shard);
  options.planner = planner;
  // Under mpirun rank r runs the shard r + 1 of N.
  if (world.active()) options.shard = sim::study::Shard{world.rank() + 1, world.size()};

  // One process writes FILE.csv.partial row by row (each fsync'd, so --resume after a kill
  // goes on from the last complete row) and renames it to FILE.csv when complete; under mpirun
  // rank 0 writes FILE.csv atomically at the end.
  std::optional<sim::io::AtomicFile> file;
  std::optional<sim::io::JournalFile> journal;
  int64_t resumed = 0;
  std::string csv_copy;  // the whole CSV as written, for the planner's table
  if (out_path && world.rank() == 0) sim::io::check_output_file(*out_path, "--out");
  // A device, FIFO or symbolic link keeps being one: written through AtomicFile (in place or
  // via the link's target), without a journal to resume from.
  bool plain_file = true;
  if (out_path) {
    struct stat st {};
    plain_file = ::lstat(out_path->c_str(), &st) != 0 || S_ISREG(st.st_mode);
  }
  if (resume && !plain_file) throw UsageError{"--resume needs --out to name a regular file"};
  if (out_path && world.rank() == 0 && (world.active() || !plain_file)) file.emplace(*out_path);
  if (out_path && !world.active() && plain_file) {
    const std::string partial = *out_path + ".partial";
    sim::study::ResumePoint point;
    if (resume) point = sim::study::find_resume_point(partial, spec, options.shard, planner);
    if (point.keep_bytes > 0) {
      // The rows kept from the killed sweep, for the planner's table at the end.
      std::ifstream kept(partial, std::ios::binary);
      csv_copy.resize(static_cast<size_t>(point.keep_bytes));
      kept.read(csv_copy.data(), point.keep_bytes);
    }
    journal.emplace(partial, point.keep_bytes, "--out");
    options.num_done = point.num_done;
    resumed = point.num_done;
  }
  // Rank 0 draws its own shard's runs; resumed rows count as done but not in the rate.
  Progress bar = Progress::for_stderr("sweep", "runs", progress_asked);
  if (world.rank() != 0) bar = Progress("sweep", "runs", false, false);
  bar.set_resumed(resumed);
  std::function<void(int64_t, int64_t)> draw;
  if (bar.enabled()) {
    draw = [&bar, resumed](int64_t done, int64_t total) {
      bar.update(done + resumed, total + resumed);
    };
  }
  sim::study::SweepStats stats;
  if (!world.active()) {
    std::ostream& sink = journal ? journal->stream() : file ? file->stream() : std::cout;
    CopyingBuf copying(sink.rdbuf(), &csv_copy);
    std::ostream csv(&copying);
    stats = sim::study::run_sweep(spec, scenario, options, csv, draw);
    if (!csv) sink.setstate(std::ios::badbit);
    if (journal) journal->commit(*out_path);
  } else {
    std::ostringstream part;
    stats = sim::study::run_sweep(spec, scenario, options, part, draw);
    const std::vector<std::string> parts = world.gather_to_root(part.str());
    stats.num_runs = world.sum(stats.num_runs);
    stats.num_errors = world.sum(stats.num_errors);
    stats.num_broken = world.sum(stats.num_broken);
    if (world.rank() != 0) return stats.num_broken > 0 ? 1 : 0;
    std::vector<std::istringstream> streams;
    streams.reserve(parts.size());
    std::vector<sim::study::NamedCsv> inputs;
    for (size_t r = 0; r < parts.size(); ++r) {
      streams.emplace_back(parts[r]);
      inputs.push_back({"rank " + std::to_string(r), &streams.back()});
    }
    std::ostream& sink = file ? file->stream() : std::cout;
    CopyingBuf copying(sink.rdbuf(), &csv_copy);
    std::ostream csv(&copying);
    sim::study::merge_sweep_csv_streams(inputs, csv);
    if (!csv) sink.setstate(std::ios::badbit);
  }
  if (file) {
    file->commit();
  } else if (!std::cout.flush()) {
    throw sim::io::OutputError("cannot write the CSV to stdout");
  }
  if (world.active()) {
    std::fprintf(stderr, "sweep: %lld runs on %d MPI ranks, %lld errors, %lld broken%s%s\n",
                 static_cast<long long>(stats.num_runs), world.size(),
                 static_cast<long long>(stats.num_errors), static_cast<long long>(stats.num_broken),
                 out_path ? " -> " : "", out_path ? out_path->c_str() : "");
  } else {
    if (resumed > 0) {
      std::fprintf(stderr, "sweep: resumed after %lld runs already in %s.partial\n",
                   static_cast<long long>(resumed), out_path->c_str());
    }
    std::fprintf(stderr, "sweep: %lld runs (shard %d/%d of %lld), %lld errors, %lld broken%s%s\n",
                 static_cast<long long>(stats.num_runs), options.shard.index, options.shard.count,
                 static_cast<long long>(sim::study::num_sweep_runs(spec)),
                 static_cast<long long>(stats.num_errors), static_cast<long long>(stats.num_broken),
                 out_path ? " -> " : "", out_path ? out_path->c_str() : "");
  }
  if (options.shard.count == 1 || world.active()) {
    report_plan(csv_copy, out_path ? *out_path : "the sweep's CSV", plan_path, stderr);
  } else {
    std::fprintf(stderr,
                 "sweep plan: a shard holds part of the grid; run moesim sweep plan on "
                 "the merged CSV\n");
  }
  return stats.num_broken > 0 ? 1 : 0;
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

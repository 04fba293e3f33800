// moesim: the simulator's command line. One file per subcommand; this file only dispatches.
// Exit codes: 0 success, 1 a failed run (e.g. conservation broken; outputs still written) or an
// output that could not be written (OutputError), 2 bad input (ConfigError or usage, an output
// path that cannot be used). A broken internal invariant (MOESIM_CHECK) aborts: SIGABRT, 134.
#include <cstdio>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "base/huge_page_heap.h"
#include "moesim_version.h"
#include "sim/config/config_error.h"
#include "sim/io/output_files.h"
#include "sim/io/signal_cleanup.h"

namespace {

using moesim::cli::Command;

const Command kCommands[] = {
    {"model", "model cards: `model show CARD` prints parameters, bytes, KV and FLOPs",
     moesim::cli::model_command},
    {"topo", "topologies: `topo show FILE` prints GPUs, links and bandwidths",
     moesim::cli::topo_command},
    {"collective", "one MoE dispatch + combine on a topology: latency, bytes, bottleneck GB/s",
     moesim::cli::collective_command},
    {"run", "simulate a scenario: summary, event digest, CSV/JSON/Chrome-trace outputs",
     moesim::cli::run_command},
    {"layers", "per-layer all-to-all vs expert compute as the decode batch grows (crossover)",
     moesim::cli::layers_command},
    {"prune", "expert pruning study: kept experts, weight memory, decode step, routing mass lost",
     moesim::cli::prune_command},
    {"calibrate", "fit a cost-model profile from engine measurements (moesim-engine replay)",
     moesim::cli::calibrate_command},
    {"derive-profile", "a profile for another GPU of the same kernels, by hardware ratios",
     moesim::cli::derive_profile_command},
    {"validate", "re-simulate measured steps with a profile: error per op, step, end to end",
     moesim::cli::validate_command},
    {"compare", "two scenarios, same seeds: paired differences with bootstrap intervals",
     moesim::cli::compare_command},
    {"sweep", "a parameter grid on all cores: one CSV row per run; --shard K/N, sweep merge",
     moesim::cli::sweep_command},
    {"search", "highest rate meeting SLOs per configuration; cheapest config for a target rate",
     moesim::cli::search_command},
    {"trace-fit", "fit a workload model to a trace window: parameters and goodness of fit",
     moesim::cli::trace_fit_command},
    {"report", "one self-contained HTML page of a run directory, sweep CSV or search JSON",
     moesim::cli::report_command},
    {"engine", "run moesim-engine (replay recorded steps, bench ops): `moesim engine --help`",
     moesim::cli::engine_command},
};

void print_help() {
  std::printf(
      "moesim %s: a deterministic simulator of Mixture-of-Experts inference clusters\n\n"
      "usage: moesim <command> [args] [--help]\n\ncommands:\n",
      MOESIM_VERSION);
  for (const auto& c : kCommands) std::printf("  %-10s %s\n", c.name, c.summary);
  std::printf(
      "\nexit codes: 0 success, 1 failed run or output write, 2 bad input; a broken internal "
      "invariant aborts (134); SIGTERM, SIGINT and SIGHUP remove temporaries and end with 128 + "
      "the signal\n"
      "every command that prints a summary takes --json\n");
}

}  // namespace

int main(int argc, char** argv) {
  // The commands that simulate run on a heap of huge pages; the others start once (a re-executed
  // start costs ~50 ms).
  if (argc > 1 && moesim::base::simulates(argv[1])) {
    moesim::base::reexec_with_huge_page_heap(argv);
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help();
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::printf("moesim %s\n", MOESIM_VERSION);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (args[0] != c.name) continue;
    // SIGTERM, SIGINT, SIGHUP remove the temporaries; `report` and `engine` execute another
    // program, which would inherit the blocked signals.
    if (args[0] != "report" && args[0] != "engine") {
      moesim::sim::io::install_signal_cleanup("moesim");
    }
    std::vector<std::string> rest(args.begin() + 1, args.end());
    try {
      return c.fn(rest);
    } catch (const moesim::sim::ConfigError& e) {
      std::fprintf(stderr, "moesim: error: %s\n", e.what());
      return moesim::sim::kExitBadInput;
    } catch (const moesim::sim::io::OutputError& e) {
      std::fprintf(stderr, "moesim: error: %s\n", e.what());
      return moesim::sim::io::kExitOutputFailed;
    } catch (const moesim::cli::UsageError& e) {
      std::fprintf(stderr, "moesim %s: %s (see moesim %s --help)\n", c.name, e.message.c_str(),
                   c.name);
      return moesim::sim::kExitBadInput;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr,
                   "moesim %s: error: out of memory (a smaller scenario, fewer outputs, or a "
                   "lower scheduler.max_queued_requests; docs/reliability.md)\n",
                   c.name);
      return moesim::sim::io::kExitOutputFailed;
    }
  }
  std::fprintf(stderr, "moesim: unknown command '%s' (see moesim --help)\n", args[0].c_str());
  return 2;
}

// `moesim topo show FILE [--json]`: a topology's GPUs, links by class, per-GPU bandwidths,
// bisection bandwidth and route latencies (sim/topology/topology_summary.h), as text or as one
// JSON document.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "sim/topology/topology_parser.h"
#include "sim/topology/topology_summary.h"

namespace moesim::cli {
namespace {

const char kUsage[] =
    "usage: moesim topo show FILE [--json]\n"
    "\n"
    "Prints a topology: GPU count and spec (peak dense FLOP/s per dtype, HBM), switches, links\n"
    "by class (count, bandwidth per direction, latency), per-GPU NVLink and network bandwidth,\n"
    "bisection bandwidth (max flow between the two halves of the nodes) and route latencies.\n"
    "\n"
    "  FILE    a topology TOML file (topologies/*.toml; schema in docs/topologies.md)\n"
    "  --json  one JSON document, units in key names\n";

}  // namespace

int topo_command(const std::vector<std::string>& argv) {
  Args args(argv, {});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& sub = args.positional(0, "subcommand (show)");
  if (sub != "show") throw UsageError{"unknown subcommand '" + sub + "' (valid: show)"};
  const std::string& path = args.positional(1, "FILE");
  const bool json = args.flag("--json");
  args.finish(2);

  const sim::TopologySummary summary = sim::describe_topology(sim::load_topology(path));
  const std::string out =
      json ? sim::summary_json(summary).dump(2) + "\n" : sim::summary_text(summary);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace moesim::cli

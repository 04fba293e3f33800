// `moesim topo show FILE [--json]`: a topology's GPUs, links by class, per-GPU bandwidths,
// bisection bandwidth and route latencies (sim/api/load.h, sim/topology/topology_summary.h), as
// text or as one JSON document.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "sim/api/load.h"

namespace moesim::cli {

int topo_command(const std::vector<std::string>& argv) {
  std::string sub, path;
  bool json = false;
  CommandLine cl("topo show FILE [options]",
                 "Prints a topology: GPU count and spec (peak dense FLOP/s per dtype, HBM),\n"
                 "switches, links by class (count, bandwidth per direction, latency), per-GPU\n"
                 "NVLink and network bandwidth, bisection bandwidth (max flow between the two\n"
                 "halves of the nodes) and route latencies.");
  cl.positional("subcommand (show)", &sub, "show")
      .positional("FILE", &path,
                  "a topology TOML file (topologies/*.toml; schema in docs/topologies.md)")
      .flag("--json", &json, "one JSON document, units in key names");
  if (!cl.parse(argv)) return 0;
  if (sub != "show") throw UsageError{"unknown subcommand '" + sub + "' (valid: show)"};
  const sim::TopologySummary summary = sim::api::topo_show(path);
  const std::string out =
      json ? sim::summary_json(summary).dump(2) + "\n" : sim::summary_text(summary);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace moesim::cli

// Reading topologies from TOML (schema: docs/topologies.md). Units in the file are those its key
// names state (GB/s, Gb/s, ns); the resulting TopologySpec holds bytes/s and ns.
#pragma once

#include <string>

#include "sim/config/toml_source.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// Reads a topology from `table` (the root of a topology file, or a [topology] table embedded in a
// scenario) into a checked spec; calls table.finish() and finish() on every sub-table, so unknown
// keys are errors. `name` becomes spec.name. Throws ConfigError naming file, line:column, key path
// and reason.
TopologySpec parse_topology_spec(TomlTable& table, const std::string& name);
// parse_topology_spec, then builds the Topology (routes included).
Topology parse_topology(TomlTable& table, const std::string& name);
// Loads the file at `path`; the topology's name is the file's stem ("h800-8x8").
Topology load_topology(const std::string& path);

}  // namespace moesim::sim

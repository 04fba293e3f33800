// Fuzzes the topology TOML reader (sim/topology/topology_parser.h): parsing, validating and
// building the graph and its routes. Specs above kMaxFuzzGpus are parsed and validated but not
// built: building is O(GPUs^2) today (all-pairs routes; docs/reliability.md, "Not done yet"), so
// a fuzzer that builds 2^20-GPU topologies reports that known limit as a timeout on every run.
#include <cstdint>

#include "sim/config/toml_source.h"
#include "sim/topology/topology.h"
#include "sim/topology/topology_parser.h"
#include "tests/fuzz/fuzz_input.h"

namespace {
constexpr int64_t kMaxFuzzGpus = 512;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or_config_error([&] {
    moesim::sim::TomlDocument doc =
        moesim::sim::TomlDocument::parse_string(moesim::fuzz::as_text(data, size), "fuzz.toml");
    moesim::sim::TomlTable root = doc.root();
    moesim::sim::TopologySpec spec = moesim::sim::parse_topology_spec(root, "fuzz");
    if (int64_t{spec.num_nodes} * spec.gpus_per_node <= kMaxFuzzGpus) {
      moesim::sim::Topology topology(std::move(spec));
    }
  });
  return 0;
}

// Fuzzes the topology TOML reader (sim/topology/topology_parser.h): parsing, validating and
// building the graph and every route shape. Specs above kMaxFuzzGpus are parsed and validated but
// not built: building is linear in GPUs (topology.h), but a 2^20-GPU topology still takes about a
// second under ASan, which libFuzzer would spend on every such input instead of exploring.
#include <cstdint>

#include "sim/config/toml_source.h"
#include "sim/topology/topology.h"
#include "sim/topology/topology_parser.h"
#include "tests/fuzz/fuzz_input.h"

namespace {
constexpr int64_t kMaxFuzzGpus = 65536;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moesim::fuzz::expect_clean_or_config_error([&] {
    moesim::sim::TomlDocument doc =
        moesim::sim::TomlDocument::parse_string(moesim::fuzz::as_text(data, size), "fuzz.toml");
    moesim::sim::TomlTable root = doc.root();
    moesim::sim::TopologySpec spec = moesim::sim::parse_topology_spec(root, "fuzz");
    if (int64_t{spec.num_nodes} * spec.gpus_per_node <= kMaxFuzzGpus) {
      moesim::sim::Topology topology(std::move(spec));
      // Routes between the first, a middle and the last GPU (every shape the fabric has).
      const int32_t n = topology.num_gpus();
      for (int32_t a : {0, n / 2, n - 1}) {
        for (int32_t b : {0, n / 3, n - 1}) {
          (void)topology.route(moesim::sim::GpuId(a), moesim::sim::GpuId(b));
          (void)topology.route_latency_ns(moesim::sim::GpuId(a), moesim::sim::GpuId(b));
        }
      }
    }
  });
  return 0;
}

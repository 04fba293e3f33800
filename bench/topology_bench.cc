// Topology scale: building a rail-optimised H800-like fat tree (graph, links, route shapes) of
// 1,024 / 4,096 / 16,384 GPUs, and computing every route of one EP128 replica's GPUs (what a
// replica's network model derives once). Memory and build time are linear in GPUs: routes are
// computed from the structure per pair (topology.h), never stored for all pairs.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "bench/h800_spec.h"
#include "sim/topology/topology.h"

namespace moesim::sim {
namespace {

// num_nodes x 8 H800-like GPUs, rail leaves of 32 nodes, 64 spines.
TopologySpec fat_tree(int32_t num_nodes) {
  return bench::h800_spec(num_nodes, 64, "h800-" + std::to_string(num_nodes) + "x8");
}

void BM_TopologyBuild(benchmark::State& state) {
  const TopologySpec spec = fat_tree(static_cast<int32_t>(state.range(0)) / 8);
  for (auto _ : state) {
    Topology t(spec);
    benchmark::DoNotOptimize(t.links().data());
  }
  state.counters["gpus"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_TopologyBuild)->Arg(1024)->Arg(4096)->Arg(16384)->Unit(benchmark::kMillisecond);

// Every ordered pair's route among 128 GPUs starting at the middle of a 16,384-GPU cluster.
void BM_RoutesOfAnEp128Replica(benchmark::State& state) {
  const Topology t(fat_tree(2048));
  const int32_t base = 8192;
  for (auto _ : state) {
    int64_t links = 0;
    for (int32_t s = base; s < base + 128; ++s) {
      for (int32_t d = base; d < base + 128; ++d) {
        links += static_cast<int64_t>(t.route(GpuId(s), GpuId(d)).size());
      }
    }
    benchmark::DoNotOptimize(links);
  }
  state.SetItemsProcessed(state.iterations() * 128 * 128);
}
BENCHMARK(BM_RoutesOfAnEp128Replica)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace moesim::sim

BENCHMARK_MAIN();

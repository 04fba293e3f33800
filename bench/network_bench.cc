// Network model speed: one MoE all-to-all (DeepEP-like layer: 4096 tokens per GPU, hidden 7168,
// top-8 of 256 experts, FP8 dispatch) per iteration, through the bottleneck model (and its
// per-route reference path), bottleneck_factored, fluid and SimGrid, at 16 to 1,024 GPUs, plus
// the traffic matrices and TrafficPlans the models read. Counter sim_us: the simulated collective
// duration. SimGrid allows one engine per process, so both SimGrid benchmarks share one model on
// the 64-GPU topology (16 GPUs = its first 2 nodes). The cases and their figures:
// docs/network.md, "Speed (bench/network_bench.cc)".
#include <benchmark/benchmark.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include "bench/h800_spec.h"
#include "sim/network/bottleneck_model.h"
#include "sim/network/factored_bottleneck_model.h"
#include "sim/network/fluid_model.h"
#include "sim/network/traffic_plan.h"
#include "sim/study/collective_study.h"
#include "sim/topology/topology_parser.h"
#if defined(MOESIM_HAVE_SIMGRID)
#include "sim/network/simgrid/simgrid_model.h"
#endif

namespace moesim::sim {
namespace {

using study::CollectiveStudySpec;
using study::draw_token_counts;
using study::parse_expert_skew;

// H800-like cluster of num_nodes x 8 GPUs, used when the topology file is missing.
TopologySpec h800_spec(int32_t num_nodes) {
  return bench::h800_spec(num_nodes, 8, "h800-" + std::to_string(num_nodes) + "x8-built");
}

const Topology& topology(int32_t num_nodes) {
  static const Topology t64 = [] {
    const std::string path = std::string(MOESIM_SOURCE_DIR) + "/topologies/h800-8x8.toml";
    return std::filesystem::exists(path) ? load_topology(path) : build_topology(h800_spec(8));
  }();
  static const Topology t1024 = [] {
    const std::string path = std::string(MOESIM_SOURCE_DIR) + "/topologies/h800-128x8.toml";
    return std::filesystem::exists(path) ? load_topology(path) : build_topology(h800_spec(128));
  }();
  return num_nodes == 8 ? t64 : t1024;
}

CollectiveStudySpec layer_spec(int32_t ep, const char* skew) {
  CollectiveStudySpec spec;
  spec.ep_size = ep;
  spec.tokens_per_gpu = 4096;
  spec.hidden = 7168;
  spec.top_k = 8;
  spec.num_experts = ep > 256 ? ep : 256;
  std::string error;
  spec.skew = *parse_expert_skew(skew, &error);
  return spec;
}

TrafficMatrix dispatch_traffic(const Topology& topo, int32_t ep, const char* skew) {
  const CollectiveStudySpec spec = layer_spec(ep, skew);
  TrafficMatrix m;
  build_dispatch_traffic(topo, draw_token_counts(topo, spec),
                         token_bytes(spec.hidden, spec.dispatch_dtype), DispatchAlgorithm::kDirect,
                         m);
  return m;
}

void run_model(benchmark::State& state, NetworkModel& model, const TrafficMatrix& traffic) {
  CollectiveResult result;
  for (auto _ : state) {
    model.run(traffic, result);
    benchmark::DoNotOptimize(result.duration_ns);
  }
  state.counters["sim_us"] = to_us(result.duration_ns);
  state.counters["flows"] = result.num_flows;
}

// One dispatch of `num_gpus` GPUs (8 GPUs per node) through network model `Model`: the exact
// bottleneck model or the factored one.
template <typename Model>
void BM_Model(benchmark::State& state, int32_t num_gpus, const char* skew) {
  const Topology& topo = topology(num_gpus / 8);
  Model model(topo);
  run_model(state, model, dispatch_traffic(topo, num_gpus, skew));
}
void BM_Bottleneck64(benchmark::State& state, const char* skew) {
  BM_Model<BottleneckModel>(state, 64, skew);
}
void BM_Bottleneck1024(benchmark::State& state) {
  BM_Model<BottleneckModel>(state, 1024, "uniform");
}
void BM_Factored64(benchmark::State& state, const char* skew) {
  BM_Model<FactoredBottleneckModel>(state, 64, skew);
}
void BM_Factored1024(benchmark::State& state) {
  BM_Model<FactoredBottleneckModel>(state, 1024, "uniform");
}
BENCHMARK_CAPTURE(BM_Bottleneck64, uniform, "uniform")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Bottleneck64, zipf_1_2, "zipf:1.2")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Bottleneck64, hot_0_5, "hot:0.5")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Bottleneck1024)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Factored64, uniform, "uniform")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Factored64, zipf_1_2, "zipf:1.2")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Factored64, hot_0_5, "hot:0.5")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Factored1024)->Unit(benchmark::kMillisecond);

// The per-route reference computation (same results bit for bit) on the same inputs.
void BM_BottleneckReference(benchmark::State& state, int32_t num_nodes) {
  const Topology& topo = topology(num_nodes);
  BottleneckModel model(topo);
  const TrafficMatrix traffic = dispatch_traffic(topo, topo.num_gpus(), "uniform");
  CollectiveResult result;
  for (auto _ : state) {
    model.run_reference(traffic, result);
    benchmark::DoNotOptimize(result.duration_ns);
  }
  state.counters["sim_us"] = to_us(result.duration_ns);
  state.counters["flows"] = result.num_flows;
}
BENCHMARK_CAPTURE(BM_BottleneckReference, uniform_64, 8)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BottleneckReference, uniform_1024, 128)->Unit(benchmark::kMillisecond);

// The shipped 64-GPU scenarios' collective: EP32 (GPUs 0-31 of h800-8x8) with hierarchical
// dispatch; decode-sized (128 tokens per GPU) and prefill-sized (4,096) layers, dispatch.
// `supported`: the matrix comes from a TrafficPlan, with its row support (as in the simulator).
void BM_BottleneckEp32Hierarchical(benchmark::State& state, int64_t tokens_per_gpu, bool reference,
                                   bool integral = false, bool supported = false) {
  const Topology& topo = topology(8);
  CollectiveStudySpec spec = layer_spec(32, "zipf:1.2");
  spec.tokens_per_gpu = tokens_per_gpu;
  TrafficMatrix traffic;
  const TokenCounts counts = draw_token_counts(topo, spec);
  const double row_bytes = token_bytes(spec.hidden, spec.dispatch_dtype);
  if (supported) {
    TrafficPlan plan;
    plan.build(topo, counts, DispatchAlgorithm::kHierarchical);
    plan.dispatch_traffic(row_bytes, traffic);
  } else {
    build_dispatch_traffic(topo, counts, row_bytes, DispatchAlgorithm::kHierarchical, traffic);
  }
  if (integral) {
    // Whole bytes, as with exact unique (token, node) counts: the per-class path.
    for (int32_t s = 0; s < traffic.size(); ++s) {
      for (int32_t d = 0; d < traffic.size(); ++d) {
        traffic.set_bytes(s, d, std::round(traffic.bytes(s, d)));
      }
    }
  }
  BottleneckModel model(topo);
  CollectiveResult result;
  for (auto _ : state) {
    reference ? model.run_reference(traffic, result) : model.run(traffic, result);
    benchmark::DoNotOptimize(result.duration_ns);
  }
  state.counters["sim_us"] = to_us(result.duration_ns);
  state.counters["flows"] = result.num_flows;
}
BENCHMARK_CAPTURE(BM_BottleneckEp32Hierarchical, decode, 128, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BottleneckEp32Hierarchical, decode_reference, 128, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BottleneckEp32Hierarchical, decode_integral, 128, false, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BottleneckEp32Hierarchical, decode_supported, 128, false, false, true)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BottleneckEp32Hierarchical, prefill, 4096, false)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_BottleneckEp32Hierarchical, prefill_supported, 4096, false, false, true)
    ->Unit(benchmark::kMicrosecond);

// Both collectives' matrices of one EP32 hierarchical layer (decode-sized, FP8 dispatch, BF16
// combine): two builders, or one TrafficPlan materialised twice (the simulator's path).
void BM_LayerTrafficEp32(benchmark::State& state, bool plan) {
  const Topology& topo = topology(8);
  CollectiveStudySpec spec = layer_spec(32, "zipf:1.2");
  spec.tokens_per_gpu = 128;
  const TokenCounts counts = draw_token_counts(topo, spec);
  TrafficPlan traffic_plan;
  TrafficMatrix dispatch, combine;
  for (auto _ : state) {
    if (plan) {
      traffic_plan.build(topo, counts, DispatchAlgorithm::kHierarchical);
      traffic_plan.dispatch_traffic(7392, dispatch);
      traffic_plan.combine_traffic(14336, combine);
    } else {
      build_dispatch_traffic(topo, counts, 7392, DispatchAlgorithm::kHierarchical, dispatch);
      build_combine_traffic(topo, counts, 14336, DispatchAlgorithm::kHierarchical, combine);
    }
    benchmark::DoNotOptimize(dispatch.row(0).data());
    benchmark::DoNotOptimize(combine.row(0).data());
  }
}
BENCHMARK_CAPTURE(BM_LayerTrafficEp32, builders, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_LayerTrafficEp32, plan, true)->Unit(benchmark::kMicrosecond);

void BM_Fluid64(benchmark::State& state, const char* skew) {
  const Topology& topo = topology(8);
  FluidModel model(topo);
  run_model(state, model, dispatch_traffic(topo, 64, skew));
}
BENCHMARK_CAPTURE(BM_Fluid64, uniform, "uniform")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Fluid64, zipf_1_2, "zipf:1.2")->Unit(benchmark::kMillisecond);

void BM_DispatchTraffic(benchmark::State& state, int32_t num_nodes, DispatchAlgorithm algorithm) {
  const Topology& topo = topology(num_nodes);
  const CollectiveStudySpec spec = layer_spec(topo.num_gpus(), "uniform");
  const TokenCounts counts = draw_token_counts(topo, spec);
  TrafficMatrix m;
  for (auto _ : state) {
    build_dispatch_traffic(topo, counts, 7392, algorithm, m);
    benchmark::DoNotOptimize(m.row(0).data());
  }
}
BENCHMARK_CAPTURE(BM_DispatchTraffic, direct_64, 8, DispatchAlgorithm::kDirect)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DispatchTraffic, hierarchical_64, 8, DispatchAlgorithm::kHierarchical)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DispatchTraffic, direct_1024, 128, DispatchAlgorithm::kDirect)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DispatchTraffic, hierarchical_1024, 128, DispatchAlgorithm::kHierarchical)
    ->Unit(benchmark::kMillisecond);

#if defined(MOESIM_HAVE_SIMGRID)
NetworkModel& simgrid_model() {
  static SimgridModel model(topology(8));  // one engine per process
  return model;
}

void BM_Simgrid(benchmark::State& state, int32_t ep, const char* skew) {
  run_model(state, simgrid_model(), dispatch_traffic(topology(8), ep, skew));
}
BENCHMARK_CAPTURE(BM_Simgrid, uniform_16, 16, "uniform")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_Simgrid, uniform_64, 64, "uniform")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Simgrid, zipf_1_2_64, 64, "zipf:1.2")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
#endif

}  // namespace
}  // namespace moesim::sim

BENCHMARK_MAIN();

// Routing hot-path cost: one MoE layer per step, DeepSeek-V3 shapes (256 experts, top-8,
// 8 groups, top-4 groups), 128 tokens per source GPU, "deepseek-v3-decode" skew.
//  - BM_RouteCounts: (source, expert) counts by the multinomial approximation;
//  - BM_RouteToGpus: the (source, destination GPU) fast path;
//  - BM_RoutePerToken: exact per-token sampling (the reference);
//  - BM_Dispatch: the placement's token-to-replica rule with replicas of the 8 hottest experts.
// Argument: number of GPUs (EP group = every GPU; 256 experts over 1,024 GPUs use 4 experts per
// GPU via 4x replication of every expert, so the per-expert path keeps 256 columns).
#include <benchmark/benchmark.h>

#include <vector>

#include "sim/placement/expert_placement.h"
#include "sim/routing/synthetic_routing.h"

namespace moesim::sim {
namespace {

constexpr int32_t kTokensPerGpu = 128;

RoutingShape bench_shape() { return RoutingShape{58, 256, 8, 8, 4}; }

std::vector<int32_t> gpu_of_expert(int32_t num_gpus) {
  std::vector<int32_t> map(256);
  for (int32_t e = 0; e < 256; ++e) {
    map[e] = num_gpus <= 256 ? e / (256 / num_gpus) : e * (num_gpus / 256);
  }
  return map;
}

void BM_RouteCounts(benchmark::State& state) {
  const auto num_gpus = static_cast<int32_t>(state.range(0));
  SyntheticRoutingModel model(bench_shape(), routing_preset("deepseek-v3-decode"), 1);
  const std::vector<int32_t> tokens(num_gpus, kTokensPerGpu);
  CountMatrix out;
  int64_t step = 0;
  for (auto _ : state) {
    model.route({step++, 10, tokens, {}}, out);
    benchmark::DoNotOptimize(out.values().data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_RouteToGpus(benchmark::State& state) {
  const auto num_gpus = static_cast<int32_t>(state.range(0));
  SyntheticRoutingModel model(bench_shape(), routing_preset("deepseek-v3-decode"), 1);
  const std::vector<int32_t> tokens(num_gpus, kTokensPerGpu);
  const std::vector<int32_t> map = gpu_of_expert(num_gpus);
  CountMatrix out;
  int64_t step = 0;
  for (auto _ : state) {
    model.route_to_gpus({step++, 10, tokens, {}}, map, num_gpus, out);
    benchmark::DoNotOptimize(out.values().data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_RoutePerToken(benchmark::State& state) {
  const auto num_gpus = static_cast<int32_t>(state.range(0));
  RoutingSpec spec = routing_preset("deepseek-v3-decode");
  spec.sampling = SamplingMode::kPerToken;
  SyntheticRoutingModel model(bench_shape(), spec, 1);
  const std::vector<int32_t> tokens(num_gpus, kTokensPerGpu);
  CountMatrix out;
  int64_t step = 0;
  for (auto _ : state) {
    model.route({step++, 10, tokens, {}}, out);
    benchmark::DoNotOptimize(out.values().data());
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Dispatch(benchmark::State& state) {
  const auto num_gpus = static_cast<int32_t>(state.range(0));
  SyntheticRoutingModel model(bench_shape(), routing_preset("deepseek-v3-decode"), 1);
  ExpertPlacement placement = ExpertPlacement::contiguous(256, num_gpus, 8, 1, "bench");
  for (int32_t e = 0; e < 8; ++e)
    placement.add_replica(e, (placement.replicas(e)[0] + 8) % num_gpus);
  const std::vector<int32_t> tokens(num_gpus, kTokensPerGpu);
  CountMatrix src_expert;
  CountMatrix src_dst;
  ReplicaDispatcher dispatcher;
  model.route({0, 10, tokens, {}}, src_expert);
  for (auto _ : state) {
    dispatcher.dispatch(placement, src_expert, src_dst);
    benchmark::DoNotOptimize(src_dst.values().data());
  }
}

BENCHMARK(BM_RouteCounts)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RouteToGpus)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RoutePerToken)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Dispatch)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace moesim::sim

BENCHMARK_MAIN();

// Whole-simulator speed: simulated seconds per wall second. One benchmark per scenarios/*.toml
// (--policies adds scenarios/policies/*.toml), each simulating --sim_s seconds (default 10) from
// time 0, and BM_SimScale/gpus:N/fidelity:T: a generated DeepSeek-V3 decode-heavy deployment of N GPUs
// (64 to 4,096; scale_scenario_text below) on the exact and the fast fidelity. Counters
// sim_s_per_wall_s, steps, wall_us_per_layer (and per scenario wall_us_per_step); the label is
// the run's event digest, so a speed change that moves results shows up. Loading is outside the
// timed region, which is wall time (the simulator is single-threaded). The counters and the
// current figures: docs/performance.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/huge_page_heap.h"
#include "sim/policy/policy_registry.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim {
namespace {

void BM_SimSpeed(benchmark::State& state, const std::string& path, double sim_s) {
  Scenario scenario = load_scenario(path);
  scenario.run.duration_s = sim_s;
  const RunOptions options;  // no traces, no step records: the plain `moesim run` hot path
  double sim_total_s = 0, wall_total_s = 0;
  int64_t steps = 0;
  std::string digest;
  for (auto _ : state) {
    auto policies = make_policies(scenario);
    const auto start = std::chrono::steady_clock::now();
    RunOutput out = run_scenario(scenario, options, -1, std::move(policies));
    const auto stop = std::chrono::steady_clock::now();
    wall_total_s += std::chrono::duration<double>(stop - start).count();
    sim_total_s += out.summary.duration_s;
    steps += out.counters.num_steps;
    digest = out.digest_hex;
    benchmark::DoNotOptimize(out.digest);
  }
  const double layers = static_cast<double>(scenario.model->layers.size());
  state.counters["sim_s_per_wall_s"] = wall_total_s > 0 ? sim_total_s / wall_total_s : 0.0;
  state.counters["steps"] = static_cast<double>(steps) / static_cast<double>(state.iterations());
  const double us_per_step = steps > 0 ? 1e6 * wall_total_s / static_cast<double>(steps) : 0.0;
  state.counters["wall_us_per_step"] = us_per_step;
  state.counters["wall_us_per_layer"] = layers > 0 ? us_per_step / layers : 0.0;
  state.SetLabel("digest " + digest);
}

// The scale family (issue 15's reference points): DeepSeek-V3 decode-heavy traffic with the
// deepseek-v3-decode skew on the rail-optimised H800 fat tree, data-parallel attention,
// hierarchical dispatch, bottleneck (contention-aware) all-to-alls; one EP64 replica at 64 GPUs,
// EP128 replicas above (256 = 2 x EP128, 1,024 = 8 x EP128, 4,096 = 32 x EP128 on a 512-node
// variant of the topology written to a temporary directory). Load scales with the GPUs: 3
// requests/s per GPU, prompts ~256 tokens, answers ~400.
std::string scale_scenario_text(int32_t num_gpus, const std::string& topology_path) {
  const int32_t ep = std::min(num_gpus, num_gpus <= 64 ? 64 : 128);
  return "name = \"scale-" + std::to_string(num_gpus) + "\"\n" +
         "model = \"" MOESIM_SOURCE_DIR "/models/deepseek-v3.toml\"\n" + "topology = \"" +
         topology_path + "\"\n" + "[deployment]\nreplicas = " + std::to_string(num_gpus / ep) +
         "\ngpus_per_replica = " + std::to_string(ep) +
         "\nattention = \"dp\"\ndispatch = \"hierarchical\"\n"
         "[scheduler]\nmax_seqs = 8192\nmax_batch_tokens_per_gpu = 2048\nworkspace_gib = 6\n"
         "[workload]\nkind = \"synthetic\"\nduration_s = 1000\n"
         "[workload.arrival]\nrate_per_s = " +
         std::to_string(3 * num_gpus) +
         "\n"
         "[workload.prompt_tokens]\ndistribution = \"lognormal\"\np50 = 256\np99 = 1024\n"
         "max = 2048\n"
         "[workload.output_tokens]\ndistribution = \"lognormal\"\nmean = 400\nsigma = 0.6\n"
         "max = 2000\n"
         "[routing]\npreset = \"deepseek-v3-decode\"\n"
         "[run]\nseed = 1\nduration_s = 10\n";
}

// The 512-node (4,096-GPU) variant of topologies/h800-128x8.toml: same nodes and links, 4 times
// the leaves, 64 spines. Written once into a temporary directory; returns its path.
std::string write_4096_gpu_topology() {
  std::ifstream in(MOESIM_SOURCE_DIR "/topologies/h800-128x8.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string t = text.str();
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"num_nodes = 128", "num_nodes = 512"},
        {"num_spines = 16", "num_spines = 64"}}) {
    const size_t at = t.find(from);
    if (at == std::string::npos) throw std::runtime_error("topology text changed: " + from);
    t.replace(at, from.size(), to);
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "moesim-scale-bench";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / "h800-512x8.toml";
  std::ofstream(path) << t;
  return path.string();
}

void BM_SimScale(benchmark::State& state, int32_t num_gpus, double sim_s, Fidelity fidelity) {
  const std::string topology = num_gpus > 1024
                                   ? write_4096_gpu_topology()
                                   : std::string(MOESIM_SOURCE_DIR "/topologies/h800-128x8.toml");
  Scenario scenario = parse_scenario_text(scale_scenario_text(num_gpus, topology),
                                          "scale-" + std::to_string(num_gpus) + ".toml",
                                          MOESIM_SOURCE_DIR "/scenarios");
  scenario.run.duration_s = sim_s;
  scenario.run.fidelity = fidelity;
  double sim_total_s = 0, wall_total_s = 0;
  int64_t steps = 0;
  std::string digest;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    RunOutput out = run_scenario(scenario, RunOptions{}, -1, {});
    const auto stop = std::chrono::steady_clock::now();
    wall_total_s += std::chrono::duration<double>(stop - start).count();
    sim_total_s += out.summary.duration_s;
    steps += out.counters.num_steps;
    digest = out.digest_hex;
  }
  const double layers = static_cast<double>(scenario.model->layers.size());
  state.counters["sim_s_per_wall_s"] = wall_total_s > 0 ? sim_total_s / wall_total_s : 0.0;
  state.counters["steps"] = static_cast<double>(steps) / static_cast<double>(state.iterations());
  const double us_per_step = steps > 0 ? 1e6 * wall_total_s / static_cast<double>(steps) : 0.0;
  // Steps are counted per replica: this is wall time per replica-step-layer.
  state.counters["wall_us_per_layer"] = layers > 0 ? us_per_step / layers : 0.0;
  state.SetLabel("digest " + digest);
}

std::vector<std::string> scenario_files(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".toml") {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace
}  // namespace moesim::sim

// Extra flags (removed before Google Benchmark parses the rest):
//   --sim_s=SECONDS   simulated span per run (default 10);
//   --scale_sim_s=S   simulated span of the BM_SimScale runs (default 10);
//   --policies        also run scenarios/policies/*.toml.
int main(int argc, char** argv) {
  moesim::base::reexec_with_huge_page_heap(argv);
  double sim_s = 10.0;
  double scale_sim_s = 10.0;
  bool policies = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--sim_s=", 8) == 0) {
      sim_s = std::strtod(argv[i] + 8, nullptr);
    } else if (std::strncmp(argv[i], "--scale_sim_s=", 14) == 0) {
      scale_sim_s = std::strtod(argv[i] + 14, nullptr);
    } else if (std::strcmp(argv[i], "--policies") == 0) {
      policies = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  if (!(sim_s > 0) || !(scale_sim_s > 0)) {
    std::fprintf(stderr, "--sim_s and --scale_sim_s must be > 0\n");
    return 2;
  }
  const std::filesystem::path root = std::filesystem::path(MOESIM_SOURCE_DIR) / "scenarios";
  std::vector<std::string> files = moesim::sim::scenario_files(root);
  if (policies) {
    for (std::string& f : moesim::sim::scenario_files(root / "policies")) files.push_back(f);
  }
  for (const std::string& file : files) {
    const std::string name =
        std::filesystem::relative(file, root).replace_extension().generic_string();
    benchmark::RegisterBenchmark(("BM_SimSpeed/" + name).c_str(), moesim::sim::BM_SimSpeed, file,
                                 sim_s)
        ->UseRealTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
  // The scale family: GPU counts of issue 15's targets, on both fidelities.
  for (const auto fidelity : {moesim::sim::Fidelity::kExact, moesim::sim::Fidelity::kFast}) {
    for (const int32_t gpus : {64, 256, 1024, 4096}) {
      benchmark::RegisterBenchmark(("BM_SimScale/gpus:" + std::to_string(gpus) +
                                    "/fidelity:" + moesim::sim::fidelity_name(fidelity))
                                       .c_str(),
                                   moesim::sim::BM_SimScale, gpus, scale_sim_s, fidelity)
          ->UseRealTime()
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
  }
  int bench_argc = static_cast<int>(args.size());
  benchmark::Initialize(&bench_argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// Whole-simulator speed: simulated seconds per wall second for every shipped scenario.
//
// One benchmark per scenarios/*.toml (scenarios/policies/*.toml too with --policies): load the
// scenario, simulate a fixed short span (--sim_s, default 10 simulated seconds, from time 0 so
// warm-up is included) and report
//   sim_s_per_wall_s  simulated seconds per wall second (the figure the README quotes);
//   steps             steps executed over all replicas;
//   wall_us_per_step  wall microseconds per step (scheduler + step model);
//   wall_us_per_layer wall_us_per_step / layers of the model card (every layer, MoE or dense);
// and the run's event digest as the label, so a speed change that moves results shows up.
// Scenario loading (topology routes, model card) is outside the timed region. The timed region
// is wall time (UseRealTime): the simulator is single-threaded, so on an idle core wall and CPU
// time agree; on a loaded machine compare the CPU column.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

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
//   --policies        also run scenarios/policies/*.toml.
int main(int argc, char** argv) {
  double sim_s = 10.0;
  bool policies = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--sim_s=", 8) == 0) {
      sim_s = std::strtod(argv[i] + 8, nullptr);
    } else if (std::strcmp(argv[i], "--policies") == 0) {
      policies = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  if (!(sim_s > 0)) {
    std::fprintf(stderr, "--sim_s must be > 0\n");
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
  int bench_argc = static_cast<int>(args.size());
  benchmark::Initialize(&bench_argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

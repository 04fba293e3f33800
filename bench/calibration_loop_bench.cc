// The calibration loop timed live (docs/calibration.md, "The loop live"): records the tiny
// model's chat and burst workloads, replays them on the CPU engine of this machine, fits chat and
// validates on burst (scripts/calibrate_cpu.sh with STEPS=24 REPEATS=11 SLICE_STEPS=0, as
// tests/data/calibration/loop/ was recorded), and reports the out-of-sample and in-sample errors
// as counters. These are CPU timings of the machine it runs on: on a loaded machine they are
// noisy, which is why `make test` checks the loop on the recorded measurements instead
// (tests/sim/calibration/calibration_loop_test.cc) and this is a benchmark. Needs the moesim and
// moesim-engine binaries of the build it belongs to; environment STEPS, REPEATS override.
//   build/bench/calibration_loop_bench [--benchmark_repetitions=N]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

nlohmann::json read_report(const fs::path& path) {
  std::ifstream f(path);
  if (!f) return nlohmann::json();
  return nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

void BM_CalibrationLoop(benchmark::State& state) {
  const fs::path build(MOESIM_BINARY_DIR);
  const fs::path out = build / "bench" / "calibration_loop";
  const std::string cmd =
      "cd '" + std::string(MOESIM_SOURCE_DIR) + "' && STEPS=" + env_or("STEPS", "24") +
      " REPEATS=" + env_or("REPEATS", "11") + " SLICE_STEPS=0 MACHINE=bench PROFILE_DIR='" +
      (out / "profiles").string() + "' scripts/calibrate_cpu.sh '" + build.string() + "' '" +
      out.string() + "' > '" + (out.string() + ".log") + "' 2>&1";
  nlohmann::json oos, in_sample;
  for (auto _ : state) {
    fs::remove_all(out);
    fs::create_directories(out);
    if (std::system(cmd.c_str()) != 0) {
      state.SkipWithError(("the loop failed: see " + out.string() + ".log").c_str());
      return;
    }
    oos = read_report(out / "xval-chat-to-burst" / "report.json");
    in_sample =
        read_report(out / "profiles" / "cpu-bench.validation" / "in-sample-burst" / "report.json");
  }
  if (!oos.is_object() || !in_sample.is_object()) {
    state.SkipWithError("no validation report");
    return;
  }
  // Percent; "bound" is the loop's 15% (docs/calibration.md).
  state.counters["oos_step_mape_pct"] = 100 * oos["per_step_compute"]["mape"].get<double>();
  state.counters["oos_duration_mape_pct"] = 100 * oos["step_duration"]["mape"].get<double>();
  state.counters["in_sample_step_mape_pct"] =
      100 * in_sample["per_step_compute"]["mape"].get<double>();
  state.counters["oos_ops_out_of_range"] = oos["num_ops_out_of_range"].get<double>();
  state.counters["bound_pct"] = 15;
}
BENCHMARK(BM_CalibrationLoop)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

// `moesim calibrate MEAS.jsonl [...] --out PROFILE.toml`: fits the cost of every operation kind
// and dtype from engine measurements and writes a calibration profile (sim/api/calibration.h,
// docs/calibration.md).
#include <iostream>
#include <optional>
#include <sstream>

#include "apps/moesim/cli.h"
#include "apps/moesim/progress.h"
#include "sim/api/calibration.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Fits time = a + b*FLOPs + c*bytes per op kind and dtype (non-negative least squares on\n"
    "relative error, with token-count regimes where the data shows them) from engine\n"
    "measurements (moesim-engine replay/bench --out) and writes a calibration profile.";

void declare(CommandLine& cl, sim::api::CalibrateRequest& a, std::optional<std::string>& nccl_tests,
             bool& json, bool& progress) {
  cl.positionals("MEAS.jsonl", &a.measurement_paths, "engine measurements (JSONL)")
      .option("-o,--out", &a.out_path, "FILE", "the profile to write (TOML, docs/calibration.md)")
      .option("--name", &a.name, "NAME", "profile name (default: BACKEND-DEVICE)")
      .option("--max-segments", &a.max_segments, "N", "regimes per fit, >= 1 (default 3)")
      .option("--min-samples", &a.min_samples, "N",
              "fewer measured records of a kind: not fitted (default 6)")
      .option("--min-size-gap", &a.min_size_gap, "X",
              "fit a kind's samples separately on each side of a jump in bytes by X or more "
              "(models of very different sizes; default 4, 0: never)")
      .option("--max-spread", &a.max_spread, "X",
              "drop records whose (max - min) / median over the repeats exceeds X (default: keep "
              "all)")
      .option("--topology", &a.topology_path, "FILE",
              "fit the network: measured all-to-alls (multi-rank engine replays, `collective` "
              "records, --nccl-tests) against this topology's nominal model give per link class "
              "(nvlink, network) an efficiency and a latency, stored in the profile's [network] "
              "section; kernel records (`gemm`, `attention_core`) are fitted against its GPU's "
              "peaks into [compute] (efficiencies per GEMM layout, attention cores)")
      .option("--nccl-tests", &nccl_tests, "FILES",
              "nccl-tests alltoall_perf outputs (comma-separated; needs --topology; MEAS.jsonl "
              "may then be omitted for a network-only profile)")
      .option("--nccl-ranks", &a.nccl_ranks, "N",
              "ranks of those runs (default: counted from their \"# Rank\" lines)")
      .flag("--json", &json, "print the fit summary as JSON")
      .flag("--progress", &progress,
            "fits done and time left on stderr even when it is not a terminal")
      .footer("exit codes: 0 success, 1 the profile could not be written, 2 bad input");
}

}  // namespace

int calibrate_command(const std::vector<std::string>& argv) {
  sim::api::CalibrateRequest request;
  std::optional<std::string> nccl_tests;
  bool json = false, progress = false;
  CommandLine cl("calibrate MEAS.jsonl [MEAS.jsonl ...] --out PROFILE.toml [options]",
                 kDescription);
  declare(cl, request, nccl_tests, json, progress);
  if (!cl.parse(argv)) return 0;
  if (nccl_tests) {
    std::stringstream list(*nccl_tests);
    std::string file;
    while (std::getline(list, file, ',')) {
      if (!file.empty()) request.nccl_tests.push_back(file);
    }
  }
  Progress bar = Progress::for_stderr("calibrate", "fits", progress);
  request.progress = bar.callback();
  const sim::api::CalibrateResult result = sim::api::calibrate(request);
  if (json) {
    std::cout << sim::api::calibrate_json(result).dump(2) << "\n";
  } else {
    sim::api::write_calibrate_text(std::cout, result);
  }
  return 0;
}

}  // namespace moesim::cli

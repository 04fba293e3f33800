// `moesim calibrate MEAS.jsonl [...] -o PROFILE.toml`: fits the cost of every operation kind and
// dtype from engine measurements and writes a calibration profile (docs/calibration.md).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/moesim/cli.h"
#include "sim/calibration/calibrate.h"
#include "sim/calibration/measurement_reader.h"
#include "sim/calibration/profile.h"

namespace moesim::cli {
namespace {

constexpr const char* kUsage =
    "usage: moesim calibrate MEAS.jsonl [MEAS.jsonl ...] -o PROFILE.toml [--name NAME]\n"
    "                        [--max-segments N] [--min-samples N] [--max-spread X] [--json]\n\n"
    "Fits time = a + b*FLOPs + c*bytes per op kind and dtype (non-negative least squares on\n"
    "relative error, with token-count regimes where the data shows them) from engine\n"
    "measurements (moesim-engine replay/bench --out) and writes a calibration profile.\n"
    "  -o, --out FILE      the profile to write (TOML, docs/calibration.md)\n"
    "  --name NAME         profile name (default: BACKEND-DEVICE)\n"
    "  --max-segments N    regimes per fit, >= 1 (default 3)\n"
    "  --min-samples N     fewer measured records of a kind: not fitted (default 6)\n"
    "  --max-spread X      drop records whose (max - min) / median over the repeats exceeds X\n"
    "                      (default: keep all)\n"
    "  --json              print the fit summary as JSON\n"
    "exit codes: 0 success, 2 bad input\n";

}  // namespace

int calibrate_command(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv = argv_in;
  for (std::string& a : argv) {
    if (a == "-o") a = "--out";
  }
  Args args(argv, {"--out", "--name", "--max-segments", "--min-samples", "--max-spread"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  auto out = args.value("--out");
  sim::CalibrateOptions opt;
  opt.name = args.value_or("--name", "");
  if (auto v = args.int_value("--max-segments")) {
    if (*v < 1) throw UsageError{"--max-segments must be >= 1"};
    opt.fit.max_segments = static_cast<int32_t>(*v);
  }
  if (auto v = args.int_value("--min-samples")) {
    if (*v < 2) throw UsageError{"--min-samples must be >= 2"};
    opt.min_samples = static_cast<int32_t>(*v);
  }
  if (auto v = args.double_value("--max-spread")) {
    if (*v <= 0) throw UsageError{"--max-spread must be > 0"};
    opt.max_repeat_spread = *v;
  }
  bool json = args.flag("--json");
  args.finish(1000);
  if (args.positionals().empty()) throw UsageError{"missing argument: MEAS.jsonl"};
  if (!out) throw UsageError{"missing -o PROFILE.toml"};

  std::vector<sim::MeasurementSet> sets;
  for (const std::string& p : args.positionals()) sets.push_back(sim::read_measurements(p));
  sim::CalibrateReport rep = sim::calibrate(sets, opt);
  if (rep.profile.ops.empty()) {
    throw UsageError{"no op kind had enough measured records to fit"};
  }
  {
    std::ofstream f(*out);
    if (!f) throw UsageError{"cannot write the profile to " + *out};
    sim::write_profile(f, rep.profile);
  }
  if (json) {
    nlohmann::json j;
    j["profile"] = *out;
    j["records"] = rep.num_records;
    j["used"] = rep.num_used;
    j["unmeasured"] = rep.num_unmeasured;
    j["noisy"] = rep.num_noisy;
    j["skipped"] = rep.skipped;
    for (const sim::OpFit& f : rep.profile.ops) {
      j["fits"].push_back({{"kind", f.kind},
                           {"dtype", f.dtype},
                           {"samples", f.quality.num_samples},
                           {"segments", f.segments.size()},
                           {"r2", f.quality.r2},
                           {"mape", f.quality.mape},
                           {"p99_abs_rel_error", f.quality.p99_abs_rel_error}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("profile %s -> %s (%lld records, %lld fitted, %lld unmeasured, %lld noisy)\n",
              rep.profile.name.c_str(), out->c_str(), static_cast<long long>(rep.num_records),
              static_cast<long long>(rep.num_used), static_cast<long long>(rep.num_unmeasured),
              static_cast<long long>(rep.num_noisy));
  std::printf("  %-18s %-5s %7s %4s %7s %8s %8s\n", "kind", "dtype", "n", "reg", "R^2", "MAPE",
              "p99|rel|");
  for (const sim::OpFit& f : rep.profile.ops) {
    std::printf("  %-18s %-5s %7lld %4zu %7.4f %7.1f%% %7.1f%%\n", f.kind.c_str(), f.dtype.c_str(),
                static_cast<long long>(f.quality.num_samples), f.segments.size(), f.quality.r2,
                100 * f.quality.mape, 100 * f.quality.p99_abs_rel_error);
  }
  for (const sim::CollectiveFit& c : rep.profile.collectives) {
    std::printf("  %-18s %-7s latency %.2f us, %.1f GB/s, MAPE %.1f%%\n", c.op.c_str(),
                c.link_class.c_str(), 1e6 * c.latency_s, 1e-9 * c.bytes_per_s,
                100 * c.quality.mape);
  }
  for (const std::string& s : rep.skipped) std::printf("  skipped: %s\n", s.c_str());
  return 0;
}

}  // namespace moesim::cli

// `moesim calibrate MEAS.jsonl [...] --out PROFILE.toml`: fits the cost of every operation kind and
// dtype from engine measurements and writes a calibration profile (docs/calibration.md).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/moesim/cli.h"
#include "apps/moesim/progress.h"
#include "sim/calibration/calibrate.h"
#include "sim/calibration/collective_reader.h"
#include "sim/calibration/measurement_reader.h"
#include "sim/cost/profile.h"
#include "sim/io/output_files.h"
#include "sim/topology/topology_parser.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Fits time = a + b*FLOPs + c*bytes per op kind and dtype (non-negative least squares on\n"
    "relative error, with token-count regimes where the data shows them) from engine\n"
    "measurements (moesim-engine replay/bench --out) and writes a calibration profile.";

struct CalibrateArgs {
  std::vector<std::string> measurement_paths;
  std::optional<std::string> out, name, topology_path, nccl_tests;
  std::optional<int64_t> max_segments, min_samples, nccl_ranks;
  std::optional<double> min_size_gap, max_spread;
  bool json = false, progress = false;
};

void declare(CommandLine& cl, CalibrateArgs& a) {
  cl.positionals("MEAS.jsonl", &a.measurement_paths, "engine measurements (JSONL)")
      .option("-o,--out", &a.out, "FILE", "the profile to write (TOML, docs/calibration.md)")
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
      .option("--nccl-tests", &a.nccl_tests, "FILES",
              "nccl-tests alltoall_perf outputs (comma-separated; needs --topology; MEAS.jsonl "
              "may then be omitted for a network-only profile)")
      .option("--nccl-ranks", &a.nccl_ranks, "N",
              "ranks of those runs (default: counted from their \"# Rank\" lines)")
      .flag("--json", &a.json, "print the fit summary as JSON")
      .flag("--progress", &a.progress,
            "fits done and time left on stderr even when it is not a terminal")
      .footer("exit codes: 0 success, 1 the profile could not be written, 2 bad input");
}

// The fit's options from the arguments; usage errors for values out of range.
sim::CalibrateOptions calibrate_options(const CalibrateArgs& a) {
  sim::CalibrateOptions opt;
  opt.name = a.name.value_or("");
  if (a.max_segments) {
    if (*a.max_segments < 1) throw UsageError{"--max-segments must be >= 1"};
    opt.fit.max_segments = static_cast<int32_t>(*a.max_segments);
  }
  if (a.min_samples) {
    if (*a.min_samples < 2) throw UsageError{"--min-samples must be >= 2"};
    opt.min_samples = static_cast<int32_t>(*a.min_samples);
  }
  if (a.min_size_gap) {
    if (*a.min_size_gap != 0 && *a.min_size_gap <= 1) {
      throw UsageError{"--min-size-gap must be > 1, or 0 to disable"};
    }
    opt.min_size_gap = *a.min_size_gap;
  }
  if (a.max_spread) {
    if (*a.max_spread <= 0) throw UsageError{"--max-spread must be > 0"};
    opt.max_repeat_spread = *a.max_spread;
  }
  if (a.nccl_ranks && *a.nccl_ranks < 2) throw UsageError{"--nccl-ranks must be >= 2"};
  if (a.nccl_tests && !a.topology_path) throw UsageError{"--nccl-tests needs --topology"};
  if (a.measurement_paths.empty() && !a.nccl_tests) {
    throw UsageError{"missing argument: MEAS.jsonl"};
  }
  if (!a.out) throw UsageError{"missing --out PROFILE.toml"};
  return opt;
}

// The all-to-alls of the nccl-tests outputs (a comma-separated list of files).
void add_nccl_tests(const std::string& list, int32_t ranks, sim::CalibrateOptions& opt) {
  for (size_t begin = 0; begin <= list.size();) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    const std::string file = list.substr(begin, end - begin);
    if (!file.empty()) {
      auto samples = sim::read_nccl_tests_alltoall(file, ranks);
      opt.collective_samples.insert(opt.collective_samples.end(), samples.begin(), samples.end());
    }
    begin = end + 1;
  }
}

void print_json(const sim::CalibrateReport& rep, const std::string& out) {
  nlohmann::json j;
  j["profile"] = out;
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
  for (const sim::LinkClassFit& f : rep.profile.network.link_classes) {
    j["network"].push_back({{"link_class", f.link_class},
                            {"efficiency", f.efficiency},
                            {"latency_s", f.latency_s},
                            {"samples", f.quality.num_samples},
                            {"mape", f.quality.mape},
                            {"p99_abs_rel_error", f.quality.p99_abs_rel_error}});
  }
  for (const sim::ComputeFitRow& r : rep.compute.rows) {
    j["compute"].push_back({{"kernel", r.what},
                            {"measured_s", r.measured_s},
                            {"fitted_s", r.fitted_s},
                            {"rel_error", (r.fitted_s - r.measured_s) / r.measured_s}});
  }
  for (const sim::KernelFit& k : rep.profile.network.kernels) {
    j["network_kernels"].push_back({{"kernel", k.kernel},
                                    {"transport", k.transport},
                                    {"fixed_s", k.fixed_s},
                                    {"samples", k.quality.num_samples},
                                    {"mape", k.quality.mape},
                                    {"p99_abs_rel_error", k.quality.p99_abs_rel_error}});
  }
  std::cout << j.dump(2) << "\n";
}

void print_network_and_compute(const sim::CalibrateReport& rep) {
  for (const sim::LinkClassFit& f : rep.profile.network.link_classes) {
    std::printf(
        "  network %-10s efficiency %.3f, latency %.2f us (%lld all-to-alls, EP %d-%d, "
        "MAPE %.1f%%, p99 %.1f%%)\n",
        f.link_class.c_str(), f.efficiency, 1e6 * f.latency_s,
        static_cast<long long>(f.quality.num_samples), f.ep_size_min, f.ep_size_max,
        100 * f.quality.mape, 100 * f.quality.p99_abs_rel_error);
  }
  for (const sim::GemmFit& g : rep.profile.compute.gemms) {
    std::printf(
        "  gemm %-18s %-4s compute eff. %.3f, input bw eff. %.3f, output bw eff. %.3f "
        "(%lld kernels, MAPE %.1f%%)\n",
        sim::gemm_layout_name(g.layout), g.dtype.c_str(), g.compute_efficiency,
        g.input_bandwidth_efficiency, g.output_bandwidth_efficiency,
        static_cast<long long>(g.quality.num_samples), 100 * g.quality.mape);
  }
  for (const sim::AttentionCoreFit& a : rep.profile.compute.attention) {
    std::printf("  attention core %-16s %-4s compute eff. %.3f, bandwidth eff. %.3f\n",
                a.kind.c_str(), a.dtype.c_str(), a.compute_efficiency, a.bandwidth_efficiency);
  }
  for (const sim::ComputeFitRow& r : rep.compute.rows) {
    std::printf("    %-50s measured %10.2f us, fitted %10.2f us (%+.1f%%)\n", r.what.c_str(),
                1e6 * r.measured_s, 1e6 * r.fitted_s,
                100 * (r.fitted_s - r.measured_s) / r.measured_s);
  }
  for (const sim::KernelFit& k : rep.profile.network.kernels) {
    std::printf(
        "  kernel %-20s over %-6s fixed %.2f us (%lld kernels, EP %d-%d, MAPE %.1f%%, "
        "p99 %.1f%%)\n",
        k.kernel.c_str(), k.transport.c_str(), 1e6 * k.fixed_s,
        static_cast<long long>(k.quality.num_samples), k.ep_size_min, k.ep_size_max,
        100 * k.quality.mape, 100 * k.quality.p99_abs_rel_error);
  }
}

void print_text(const sim::CalibrateReport& rep, const std::string& out) {
  std::printf("profile %s -> %s (%lld records, %lld fitted, %lld unmeasured, %lld noisy)\n",
              rep.profile.name.c_str(), out.c_str(), static_cast<long long>(rep.num_records),
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
  print_network_and_compute(rep);
  for (const std::string& s : rep.skipped) std::printf("  skipped: %s\n", s.c_str());
}

}  // namespace

int calibrate_command(const std::vector<std::string>& argv) {
  CalibrateArgs a;
  CommandLine cl("calibrate MEAS.jsonl [MEAS.jsonl ...] --out PROFILE.toml [options]",
                 kDescription);
  declare(cl, a);
  if (!cl.parse(argv)) return 0;
  sim::CalibrateOptions opt = calibrate_options(a);
  Progress bar = Progress::for_stderr("calibrate", "fits", a.progress);
  sim::io::check_output_file(*a.out, "--out");

  std::vector<sim::MeasurementSet> sets;
  for (const std::string& p : a.measurement_paths) sets.push_back(sim::read_measurements(p));
  std::optional<sim::Topology> topology;
  if (a.topology_path) {
    topology.emplace(sim::load_topology(*a.topology_path));
    opt.topology = &*topology;
  }
  if (a.nccl_tests)
    add_nccl_tests(*a.nccl_tests, static_cast<int32_t>(a.nccl_ranks.value_or(0)), opt);
  opt.progress = bar.callback();
  sim::CalibrateReport rep = sim::calibrate(sets, opt);
  if (rep.profile.ops.empty() && rep.profile.network.empty() && rep.profile.compute.empty()) {
    throw UsageError{"no op kind (and no link class) had enough measured records to fit"};
  }
  sim::io::write_file_atomically(*a.out,
                                 [&](std::ostream& os) { sim::write_profile(os, rep.profile); });
  if (a.json) {
    print_json(rep, *a.out);
  } else {
    print_text(rep, *a.out);
  }
  return 0;
}

}  // namespace moesim::cli

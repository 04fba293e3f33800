// `moesim derive-profile FROM.toml --source-topology FILE --topology FILE --out OUT.toml`: a
// calibration profile for another GPU of the same kernels, derived from a fitted one by hardware
// ratios (docs/calibration.md, "Derived profiles"). The [compute] and [network] sections hold
// efficiencies relative to the GPU's peaks and the topology's line rates, so they carry over;
// the derived profile names its source and the ratios, and is labelled derived, not measured.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "apps/moesim/cli.h"
#include "sim/cost/profile.h"
#include "sim/io/output_files.h"
#include "sim/topology/topology_parser.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Derives a calibration profile for the GPU and fabric of --topology from a fitted profile\n"
    "(FROM.toml) of the same kernels on --source-topology, by hardware ratios: the fitted\n"
    "efficiencies of [compute] (GEMMs, attention cores: relative to the GPU's peak FLOP/s and\n"
    "HBM bandwidth) and [network] (relative to the link line rates) are kept, so kernel times\n"
    "scale with the peaks and line rates of the new hardware. The profile records its source\n"
    "and the ratios (derived_from, derivation) and is labelled derived, not measured.\n"
    "Profiles with engine op fits ([[op]]) or measured collectives ([[collective]]) are\n"
    "refused: those are absolute seconds of the device they were measured on.";

// "x" with three decimals, or "n/a" when either side lacks the figure.
std::string ratio_text(double target, double source) {
  if (!(source > 0) || !(target > 0)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", target / source);
  return buf;
}

// Refuses a profile that hardware ratios cannot carry to another GPU.
void check_derivable(const sim::CalibrationProfile& p, const std::string& from_path,
                     const sim::Topology& source) {
  const auto bad = [&](const std::string& reason) { throw UsageError{from_path + ": " + reason}; };
  if (!p.ops.empty() || !p.collectives.empty()) {
    bad("has engine op fits ([[op]]) or measured collectives ([[collective]]): absolute seconds "
        "of the measured device, which hardware ratios cannot carry; derive only profiles of "
        "[compute] and [network] efficiencies");
  }
  if (p.compute.empty() && p.network.empty()) bad("has no [compute] or [network] section");
  if (!p.derived_from.empty()) {
    bad("is itself derived (from " + p.derived_from + "); derive from the fitted profile");
  }
  if (!p.compute.empty() && p.compute.gpu != source.gpu_spec().name) {
    throw UsageError{"--source-topology: its GPU is " + source.gpu_spec().name + ", but " +
                     from_path + "'s [compute] was fitted on " + p.compute.gpu};
  }
  if (!p.network.empty() && p.network.topology != source.name()) {
    throw UsageError{"--source-topology: it is " + source.name() + ", but " + from_path +
                     "'s [network] was fitted on " + p.network.topology};
  }
}

// The derivation's text: the GPUs and the ratios of their peaks and line rates.
std::string derivation_text(const std::string& from_name, const sim::Topology& source,
                            const sim::Topology& target) {
  const sim::GpuSpec& s = source.gpu_spec();
  const sim::GpuSpec& t = target.gpu_spec();
  return from_name + " (" + s.name + " on " + source.name() + ") -> " + t.name + " on " +
         target.name() +
         ": the same kernels at the same fraction of each peak and line rate (the "
         "efficiencies are copied); target / source peaks: BF16 " +
         ratio_text(t.bf16_flops_per_s, s.bf16_flops_per_s) + ", FP8 " +
         ratio_text(t.fp8_flops_per_s, s.fp8_flops_per_s) + ", FP4 " +
         ratio_text(t.fp4_flops_per_s, s.fp4_flops_per_s) + ", HBM bandwidth " +
         ratio_text(t.hbm_bytes_per_s, s.hbm_bytes_per_s) + "; line rates per GPU: NVLink " +
         ratio_text(target.nvlink_bytes_per_s_per_gpu(), source.nvlink_bytes_per_s_per_gpu()) +
         ", NIC " + ratio_text(target.nic_bytes_per_s_per_gpu(), source.nic_bytes_per_s_per_gpu());
}

}  // namespace

int derive_profile_command(const std::vector<std::string>& argv) {
  std::string from_path;
  std::optional<std::string> out, source_path, target_path, name;
  CommandLine cl(
      "derive-profile FROM.toml --source-topology FILE --topology FILE "
      "--out PROFILE.toml [options]",
      kDescription);
  cl.positional("FROM.toml", &from_path, "a fitted profile")
      .option("--source-topology", &source_path, "FILE",
              "the topology FROM.toml was fitted on (its GPU and links)")
      .option("--topology", &target_path, "FILE", "the topology to derive for (its GPU and links)")
      .option("-o,--out", &out, "FILE", "the derived profile")
      .option("--name", &name, "NAME", "profile name (default: FROM's name + \"-derived-\" + GPU)")
      .footer("exit codes: 0 success, 1 the profile could not be written, 2 bad input");
  if (!cl.parse(argv)) return 0;
  if (!source_path) throw UsageError{"missing --source-topology FILE"};
  if (!target_path) throw UsageError{"missing --topology FILE"};
  if (!out) throw UsageError{"missing --out PROFILE.toml"};
  sim::io::check_output_file(*out, "--out");

  sim::CalibrationProfile p = sim::load_profile(from_path);
  const sim::Topology source = sim::load_topology(*source_path);
  const sim::Topology target = sim::load_topology(*target_path);
  check_derivable(p, from_path, source);
  const std::string from_name = p.name;
  const std::string text = derivation_text(from_name, source, target);
  const sim::GpuSpec& t = target.gpu_spec();
  p.name = name ? *name : from_name + "-derived-" + t.name;
  p.backend = "derived";
  p.device = t.name + " (derived from " + from_name + ", " + p.device + ")";
  p.derived_from = std::filesystem::path(from_path).filename().string();
  p.derivation = text;
  if (!p.compute.empty()) p.compute.gpu = t.name;
  if (!p.network.empty()) p.network.topology = target.name();
  sim::io::write_file_atomically(*out, [&](std::ostream& os) { sim::write_profile(os, p); });
  std::printf("moesim derive-profile: %s\n  %s\n  wrote %s\n", p.name.c_str(), text.c_str(),
              out->c_str());
  return 0;
}

}  // namespace moesim::cli

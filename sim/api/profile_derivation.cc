// `moesim derive-profile` (calibration.h): a calibration profile for another GPU of the same
// kernels, derived from a fitted one by hardware ratios (docs/calibration.md, "Derived
// profiles"). The [compute] and [network] sections hold efficiencies relative to the GPU's peaks
// and the topology's line rates, so they carry over; the derived profile names its source and
// the ratios, and is labelled derived, not measured.
#include <filesystem>

#include "sim/api/calibration.h"
#include "sim/api/text_format.h"
#include "sim/api/usage_error.h"
#include "sim/io/output_files.h"
#include "sim/topology/topology_parser.h"

namespace moesim::sim::api {
namespace {

// "x" with three decimals, or "n/a" when either side lacks the figure.
std::string ratio_text(double target, double source) {
  if (!(source > 0) || !(target > 0)) return "n/a";
  return format_text("%.3f", target / source);
}

// Refuses a profile that hardware ratios cannot carry to another GPU.
void check_derivable(const CalibrationProfile& p, const std::string& from_path,
                     const Topology& source) {
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
std::string derivation_text(const std::string& from_name, const Topology& source,
                            const Topology& target) {
  const GpuSpec& s = source.gpu_spec();
  const GpuSpec& t = target.gpu_spec();
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

DerivedProfile derive_profile(const DeriveProfileRequest& request) {
  if (!request.source_topology_path) throw UsageError{"missing --source-topology FILE"};
  if (!request.topology_path) throw UsageError{"missing --topology FILE"};
  if (!request.out_path) throw UsageError{"missing --out PROFILE.toml"};
  io::check_output_file(*request.out_path, "--out");

  DerivedProfile d{load_profile(request.from_path), "", *request.out_path};
  CalibrationProfile& p = d.profile;
  const Topology source = load_topology(*request.source_topology_path);
  const Topology target = load_topology(*request.topology_path);
  check_derivable(p, request.from_path, source);
  const std::string from_name = p.name;
  d.derivation = derivation_text(from_name, source, target);
  const GpuSpec& t = target.gpu_spec();
  p.name = request.name ? *request.name : from_name + "-derived-" + t.name;
  p.backend = "derived";
  p.device = t.name + " (derived from " + from_name + ", " + p.device + ")";
  p.derived_from = std::filesystem::path(request.from_path).filename().string();
  p.derivation = d.derivation;
  if (!p.compute.empty()) p.compute.gpu = t.name;
  if (!p.network.empty()) p.network.topology = target.name();
  io::write_file_atomically(d.out_path, [&](std::ostream& os) { write_profile(os, p); });
  return d;
}

void write_derive_profile_text(std::ostream& os, const DerivedProfile& d) {
  os << "moesim derive-profile: " << d.profile.name << "\n  " << d.derivation << "\n  wrote "
     << d.out_path << "\n";
}

}  // namespace moesim::sim::api

// A calibration profile: the fitted cost of every operation kind (per dtype) on one device, the
// ranges the fits saw and their quality, plus, where all-to-alls were measured, their fits per
// engine op ([[collective]]) and the per-link-class efficiency and latency ([network]). Written by
// `moesim calibrate`, read by the calibrated cost model and `moesim validate`. File format (TOML,
// schema "moesim.profile.v1"): docs/calibration.md.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "sim/cost/compute_calibration.h"
#include "sim/cost/fit_types.h"
#include "sim/cost/network_calibration.h"

namespace moesim::sim {

// All-to-all time = latency_s + bytes / bytes_per_s, fitted on measured collectives of one link
// class ("local" for a single node's NVLink, "network" across nodes).
struct CollectiveFit {
  std::string op;          // "dispatch_a2a" or "combine_a2a"
  std::string link_class;  // "local" or "network"
  double latency_s = 0;
  double bytes_per_s = 0;  // > 0
  FitRange range;          // bytes = sent + received per rank
  FitQuality quality;
};

struct CalibrationProfile {
  std::string name;     // e.g. "cpu-epyc"
  std::string backend;  // "cpu", "cuda"
  std::string device;
  std::string moesim_version;
  std::vector<std::string> measurement_files;  // file names (no directories) fitted from
  // A profile derived from another by hardware ratios (`moesim derive-profile`): the source
  // profile's file name and how it was derived; both empty for a fitted profile.
  std::string derived_from;
  std::string derivation;
  std::vector<OpFit> ops;
  std::vector<CollectiveFit> collectives;
  // Per link class efficiency and latency of measured all-to-alls (network_fit.h); applied to
  // the topology of scenarios that use the profile. Empty when no collective was measured.
  NetworkCalibration network;
  // Kernel-level compute fits ([compute]: GEMMs by layout, attention cores), relative to the
  // GPU's peaks (compute_calibration.h); empty unless kernel benchmarks were fitted.
  ComputeCalibration compute;

  // A (kind, dtype) may have several fits, one per size group (calibrate.h), with disjoint
  // byte ranges in ascending order.
  // The first fit of (kind, dtype), or null.
  const OpFit* find(std::string_view kind, std::string_view dtype) const;
  // The fit of (kind, dtype) for work of `bytes`: the one whose byte range holds it, else the
  // nearest (in ratio) by range; null when (kind, dtype) has no fit.
  const OpFit* find(std::string_view kind, std::string_view dtype, double bytes) const;
  // Fits of `kind`, any dtype.
  std::vector<const OpFit*> find_kind(std::string_view kind) const;
};

// Writes the profile as TOML (round-trips through load_profile to the same values).
void write_profile(std::ostream& os, const CalibrationProfile& profile);
// Reads a profile. Throws ConfigError naming the file, line:column, key path and reason.
CalibrationProfile load_profile(const std::string& path);
CalibrationProfile parse_profile(std::string_view text, const std::string& name);

}  // namespace moesim::sim

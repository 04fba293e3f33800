// `moesim derive-profile FROM.toml --source-topology FILE --topology FILE --out OUT.toml`: a
// calibration profile for another GPU of the same kernels, derived from a fitted one by hardware
// ratios (sim/api/calibration.h; docs/calibration.md, "Derived profiles").
#include <iostream>

#include "apps/moesim/cli.h"
#include "sim/api/calibration.h"

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

}  // namespace

int derive_profile_command(const std::vector<std::string>& argv) {
  sim::api::DeriveProfileRequest r;
  CommandLine cl(
      "derive-profile FROM.toml --source-topology FILE --topology FILE "
      "--out PROFILE.toml [options]",
      kDescription);
  cl.positional("FROM.toml", &r.from_path, "a fitted profile")
      .option("--source-topology", &r.source_topology_path, "FILE",
              "the topology FROM.toml was fitted on (its GPU and links)")
      .option("--topology", &r.topology_path, "FILE",
              "the topology to derive for (its GPU and links)")
      .option("-o,--out", &r.out_path, "FILE", "the derived profile")
      .option("--name", &r.name, "NAME",
              "profile name (default: FROM's name + \"-derived-\" + GPU)")
      .footer("exit codes: 0 success, 1 the profile could not be written, 2 bad input");
  if (!cl.parse(argv)) return 0;
  sim::api::write_derive_profile_text(std::cout, sim::api::derive_profile(r));
  return 0;
}

}  // namespace moesim::cli

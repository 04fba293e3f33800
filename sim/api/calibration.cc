#include "sim/api/calibration.h"

#include <cstdint>

#include "sim/api/option_domain.h"
#include "sim/api/usage_error.h"
#include "sim/calibration/collective_reader.h"
#include "sim/calibration/measurement_reader.h"
#include "sim/io/output_files.h"
#include "sim/topology/topology_parser.h"

namespace moesim::sim::api {
namespace {

// The fit's options from the request; usage errors for values out of range.
CalibrateOptions calibrate_options(const CalibrateRequest& r) {
  CalibrateOptions opt;
  opt.name = r.name.value_or("");
  // Domains (docs/calibration.md): counts within int32, ratios finite; NaN is in none of them.
  if (r.max_segments) {
    check_option_in("--max-segments", *r.max_segments, 1, 1000, "regimes per fit");
    opt.fit.max_segments = static_cast<int32_t>(*r.max_segments);
  }
  if (r.min_samples) {
    check_option_in("--min-samples", *r.min_samples, 2, INT32_MAX, "measured records");
    opt.min_samples = static_cast<int32_t>(*r.min_samples);
  }
  if (r.min_size_gap) {
    if (*r.min_size_gap != 0 && !(*r.min_size_gap > 1 && *r.min_size_gap <= 1e15)) {
      throw UsageError{"--min-size-gap must be > 1 and at most 1e15, or 0 to disable"};
    }
    opt.min_size_gap = *r.min_size_gap;
  }
  if (r.max_spread) {
    if (!(*r.max_spread > 0 && *r.max_spread <= 1e15)) {
      throw UsageError{"--max-spread must be > 0 and at most 1e15"};
    }
    opt.max_repeat_spread = *r.max_spread;
  }
  if (r.nccl_ranks) check_option_in("--nccl-ranks", *r.nccl_ranks, 2, 1 << 20, "ranks");
  if (!r.nccl_tests.empty() && !r.topology_path) {
    throw UsageError{"--nccl-tests needs --topology"};
  }
  if (r.measurement_paths.empty() && r.nccl_tests.empty()) {
    throw UsageError{"missing argument: MEAS.jsonl"};
  }
  if (!r.out_path) throw UsageError{"missing --out PROFILE.toml"};
  return opt;
}

}  // namespace

CalibrateResult calibrate(const CalibrateRequest& request) {
  CalibrateOptions opt = calibrate_options(request);
  io::check_output_file(*request.out_path, "--out");
  std::vector<MeasurementSet> sets;
  for (const std::string& p : request.measurement_paths) sets.push_back(read_measurements(p));
  std::optional<Topology> topology;
  if (request.topology_path) {
    topology.emplace(load_topology(*request.topology_path));
    opt.topology = &*topology;
  }
  const int32_t ranks = static_cast<int32_t>(request.nccl_ranks.value_or(0));
  for (const std::string& file : request.nccl_tests) {
    auto samples = read_nccl_tests_alltoall(file, ranks);
    opt.collective_samples.insert(opt.collective_samples.end(), samples.begin(), samples.end());
  }
  opt.progress = request.progress;
  CalibrateResult result{sim::calibrate(sets, opt), *request.out_path};
  const CalibrationProfile& p = result.report.profile;
  if (p.ops.empty() && p.network.empty() && p.compute.empty()) {
    throw UsageError{"no op kind (and no link class) had enough measured records to fit"};
  }
  io::write_file_atomically(result.out_path, [&](std::ostream& os) { write_profile(os, p); });
  return result;
}

}  // namespace moesim::sim::api

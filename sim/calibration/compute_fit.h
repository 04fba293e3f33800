// The compute fit of kernel benchmarks (`gemm` and `attention_core` measurement records) into a
// profile's [compute] section (sim/cost/compute_calibration.h), relative to one GPU's peaks.
//
// GEMMs: seconds as FLOPs over the dtype's peak and input and output bytes over HBM, each divided
// by an efficiency (per layout for compute and input, one shared for output), solved by
// non-negative least squares on relative error as in op_fit.h. Attention cores: per (op, dtype),
// the efficiency of the limit each record names (memory- or compute-bound). Unneeded terms are
// stored at the reader's bound of 1e3 (never binding) and reported. docs/calibration.md ("Public
// profile: compute") has the formulas and why the output efficiency is shared.
#pragma once

#include <string>
#include <vector>

#include "sim/calibration/measurement_reader.h"
#include "sim/cost/compute_calibration.h"
#include "sim/topology/gpu_spec.h"

namespace moesim::sim {

struct ComputeFitRow {
  std::string what;  // e.g. "masked_grouped g=4 m=256 n=4096 k=7168 fp8"
  double measured_s = 0;
  double fitted_s = 0;
};

struct ComputeFitReport {
  ComputeCalibration calibration;
  std::vector<ComputeFitRow> rows;  // every sample, in input order (GEMMs, then cores)
  std::vector<std::string> skipped;
};

// Fits the samples against `gpu`'s peaks. Throws std::invalid_argument when `gpu` lacks the
// peak of a sample's dtype or the HBM bandwidth.
ComputeFitReport fit_compute(const std::vector<GemmSample>& gemms,
                             const std::vector<AttentionCoreSample>& cores, const GpuSpec& gpu);

// The peak FLOP/s of a profile dtype ("fp8", "bf16", "fp32") on `gpu` (0 when it has none).
double profile_dtype_peak(const GpuSpec& gpu, const std::string& dtype);

}  // namespace moesim::sim

// The compute fit of kernel benchmarks (`gemm` and `attention_core` measurement records) into a
// profile's [compute] section (sim/cost/compute_calibration.h), relative to one GPU's peaks.
//
// GEMMs: seconds = F / (P c_l) + I / (B i_l) + O / (B o), F the FLOPs, I and O the input and
// output bytes (DeepGEMM's definitions), P the dtype's peak, B the HBM bandwidth; per layout l a
// compute and an input efficiency, one output efficiency shared by the layouts (the contiguous
// rows alone cannot tell an output-write cost from a fixed cost: both grow with M N / (M N K)
// alike). Linear in 1 / efficiency, so it is solved by least squares on relative error with
// non-negative coefficients, every subset of the features tried, the best non-negative one kept
// (as op_fit.h). A coefficient the data does not need is 0: its efficiency is stored as 1e3 (the
// profile reader's bound), i.e. that term costs next to nothing.
// Attention cores: per (op, dtype), the efficiency of the limit each record names: a memory-bound
// record gives bandwidth_efficiency = bytes / (seconds B), a compute-bound one
// compute_efficiency = flops / (seconds P); the mean when several name the same limit. A core
// without a memory-bound record takes the bandwidth efficiency of another dtype's core of the same
// kind (the cache is read over the same HBM); a limit without any record stays at 1e3 (never
// binding). Both are reported in `skipped`.
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

// From engine measurements to a calibration profile.
//
// Engine op names map to cost-model kinds (sim/cost/op_work.h) one to one, except that the
// engine's `unpermute` is priced with permute and the measured all-to-alls become collective
// fits (and feed network_fit.h when a topology is given). Each kind is fitted on the features
// both FLOP/byte conventions agree on: bytes for rmsnorm, permute and unpermute, FLOPs and bytes
// otherwise, and only the weight bytes for lm_head. Where the conventions differ the calibrated
// cost model adapts the simulator's query (calibrated_cost_model.h). docs/calibration.md
// ("Fits", "Vocabulary and FLOP/byte conventions") has the table.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/calibration/compute_fit.h"
#include "sim/calibration/measurement_reader.h"
#include "sim/calibration/network_fit.h"
#include "sim/calibration/op_fit.h"
#include "sim/cost/profile.h"

namespace moesim::sim {

struct CalibrateOptions {
  std::string name;  // profile name; default: "<backend>-<device>"
  FitOptions fit;
  // Records whose (max - min) / median over the repeats exceeds this are dropped as noisy
  // (0 keeps all).
  double max_repeat_spread = 0.0;
  // Kinds with fewer usable samples are not fitted (and reported as skipped).
  int32_t min_samples = 6;
  // Size groups: the samples of one (kind, dtype), sorted by the bytes they fit on, are split
  // wherever one sample's bytes exceed the previous one's by at least this factor and both
  // sides keep min_samples; each group gets its own fit (its own ranges, regimes, quality).
  // Models of very different sizes (the tiny model and the DeepSeek-V3 slice) run at different
  // efficiencies on the same kernels, and one linear law across both fits neither. 0 disables.
  double min_size_gap = 4.0;
  // The network fit: measured all-to-alls (the sets' `collective` and engine all-to-all records,
  // plus `collective_samples`, e.g. from nccl-tests) against this topology's nominal model.
  // Null: no network fit (samples are then reported as skipped).
  const Topology* topology = nullptr;
  std::vector<CollectiveSample> collective_samples;
  // Called with (fits done, fits in all) after each (kind, dtype) fit, each collective fit and
  // the network fit; may be empty.
  std::function<void(int64_t, int64_t)> progress;
};

struct CalibrateReport {
  CalibrationProfile profile;
  int64_t num_records = 0;     // op records read
  int64_t num_used = 0;        // records that entered a fit
  int64_t num_unmeasured = 0;  // measured == false (single-rank all-to-alls)
  int64_t num_noisy = 0;       // dropped by max_repeat_spread
  // Records the engine flagged noisy (docs/calibration.md, "Measuring on a shared CPU"): left
  // out of their fit, or kept where the fit's clean records are fewer than min_samples.
  int64_t num_flagged_noisy = 0;
  int64_t num_noisy_kept = 0;
  std::vector<std::string> skipped;    // "kind/dtype: reason"
  int64_t num_collective_samples = 0;  // all-to-all samples for the network fit
  NetworkFitReport network;            // rows empty when there was no network fit
  // The kernel-level compute fit of `gemm` / `attention_core` records against the topology's GPU
  // peaks (compute_fit.h); rows empty when there were none.
  ComputeFitReport compute;
};

// The cost-model kind an engine op name maps to, or "" for the all-to-alls and unknown names.
std::string cost_kind_of_engine_op(const std::string& engine_op);
// The features fitted for a cost-model kind (see the file comment).
std::vector<FitFeature> fit_features_of_kind(const std::string& kind);
// The bytes a record's fit uses: weight_bytes for lm_head, bytes otherwise.
double fit_bytes_of(const OpSample& sample);

// Fits every (kind, dtype) present in `sets`. Records of different sets are pooled.
CalibrateReport calibrate(const std::vector<MeasurementSet>& sets, const CalibrateOptions& options);

}  // namespace moesim::sim

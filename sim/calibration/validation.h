// Validation: simulated against engine-measured times, per op kind, per phase, per step and end
// to end, for one measurement file and the re-simulation of the steps it replayed.
//
// Per op kind the profile's fit prices each measured record from its own work (the cost model's
// error); per phase and step the StepModel's re-simulation with the calibrated model is compared
// with the sums of the measured ops (the simulator's error); end to end each step is composed
// with the step model's barriers or the recorded overlap schedule from simulated and from
// measured compute, the collectives simulated on both sides. The re-simulation is resimulate.h,
// the writers validation_writers.h; docs/calibration.md ("Validation") has the levels.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/calibration/error_stats.h"
#include "sim/calibration/measurement_reader.h"
#include "sim/calibration/step_trace_reader.h"
#include "sim/cost/profile.h"
#include "sim/scenario/deployment.h"
#include "sim/serving/layer_timeline.h"

namespace moesim::sim {

enum class Phase { kAttention, kDenseFfn, kRouter, kExperts };
inline constexpr int kNumPhases = 4;
// "attention", "dense_ffn", "router", "experts".
const char* phase_name(Phase p);
// The phase of an engine op name; false for the all-to-alls and unknown names.
bool phase_of_engine_op(const std::string& op, Phase* phase);

// One recorded step as the StepModel re-simulated it.
struct ResimulatedStep {
  int64_t step = 0;
  int32_t replica = 0;
  std::vector<int32_t> gpus;  // global ids, replica order
  double duration_s = 0;      // the StepModel's step time
  // phase_s[gpu_idx][layer_idx][phase]
  std::vector<std::vector<std::array<double, kNumPhases>>> phase_s;
  std::vector<double> dispatch_s, combine_s;  // per layer (0 for dense layers)
  // The schedule the step was timed with (the trace's, else the scenario's deployment.overlap).
  // kSimple: dispatch_s holds the layer's dispatch + combine, combine_s is 0, and a layer ends
  // max(C, D) + min(C, D) / 2 after its earliest GPU clock (C: the latest GPU's compute from
  // there, D: the collectives), as in the StepModel. kTwoMicrobatch / kDecodePipeline: the MoE
  // layers' stage costs per micro-batch (stage_costs[layer], from the step model's spans; empty
  // otherwise), composed on the same timeline (sim/serving/layer_timeline.h); measured
  // compositions scale each stage by its phase's measured / simulated time on that GPU and layer
  // (the engine replays the whole batch, not the micro-batches).
  OverlapMode overlap = OverlapMode::kNone;
  // With a micro-batch schedule: how compute shares the SMs with the collectives (the scenario's
  // comm_sms; docs/serving.md, "SM sharing"). stage_costs hold full-rate work, and the
  // compositions apply the sharing.
  SmSharing sm_sharing;
  std::vector<LayerStageCosts> stage_costs;
  std::vector<double> lm_head_s;  // per GPU
};

struct ValidationInput {
  const MeasurementSet* measurements = nullptr;
  const CalibrationProfile* profile = nullptr;
  const StepTraceFile* trace = nullptr;
  std::vector<ResimulatedStep> steps;
  // Model layer -> the measured layer standing for it (itself under --layers all; the sampled
  // layer of the same signature otherwise); -1 when none was run.
  std::vector<int32_t> measured_layer_of_layer;
  // Model layer -> whether it is an MoE layer (its dispatch and combine barriers apply even when
  // no token crosses GPUs).
  std::vector<bool> is_moe_layer;
  int64_t num_out_of_range_queries = 0;  // from the calibrated cost model during re-simulation
  int64_t num_proxy_queries = 0;
  // MoE layers re-simulated / whose combine bytes differ from the recording (the re-simulation
  // did not reproduce the recorded routing under the placement in force; dispatch bytes are not
  // compared: placement policies' weight copies ride on them).
  int64_t num_moe_layers_checked = 0;
  int64_t num_routing_mismatches = 0;
};

struct OpComparison {
  int64_t step = 0;
  int32_t gpu = 0;
  int32_t layer_idx = 0;
  std::string op;  // engine name
  std::string dtype;
  int64_t tokens = 0;
  double flops = 0, bytes = 0;
  double measured_s = 0, simulated_s = 0;
  bool in_range = true;
};

struct PhaseComparison {
  int64_t step = 0;
  int32_t gpu = 0;
  int32_t layer_idx = 0;
  Phase phase = Phase::kAttention;
  double measured_s = 0, simulated_s = 0;
};

struct StepComparison {
  int64_t step = 0;
  int32_t replica = 0;
  int32_t gpu = 0;
  double measured_compute_s = 0, simulated_compute_s = 0;
};

struct EndToEndMetric {
  std::string name;  // e.g. "ttft_p50_ms"
  double simulated = 0, measured = 0;
};

struct ValidationReport {
  std::string measurement_file, profile_name, trace_file;  // file names without directories
  std::vector<OpComparison> ops;
  std::map<std::string, ErrorStats> by_op;  // engine op name -> stats
  int64_t num_ops_without_fit = 0;          // measured records whose kind/dtype has no fit
  int64_t num_ops_out_of_range = 0;         // priced outside their fit's range
  std::vector<PhaseComparison> phases;
  std::array<ErrorStats, kNumPhases> by_phase;
  std::vector<StepComparison> steps;
  ErrorStats per_step;                                // per (step, GPU) compute
  std::vector<std::array<double, 3>> step_durations;  // (step, measured_s, simulated_s)
  ErrorStats step_duration;                           // composed step durations
  double max_composition_error_s = 0;                 // |composed simulated - StepModel duration|
  std::vector<EndToEndMetric> end_to_end;
  std::string end_to_end_note;  // why end-to-end metrics are missing, when they are
  // With an overlap schedule (ResimulatedStep::overlap not kNone): which, and that the engine
  // replayed without it; empty otherwise.
  std::string overlap_note;
  int64_t num_out_of_range_queries = 0;
  int64_t num_proxy_queries = 0;
  int64_t num_moe_layers_checked = 0;
  int64_t num_routing_mismatches = 0;  // ValidationInput's
  int64_t num_lm_head_measured = 0;    // (step, GPU) pairs whose output head the engine timed
};

// Compares (see the file comment). Preconditions: the pointers are non-null and the
// re-simulated steps are those of the trace the measurements replayed.
ValidationReport validate(const ValidationInput& input);

}  // namespace moesim::sim

// Validation's re-simulation: the steps an engine replay measured, run again by the simulator
// with a calibrated profile and the routing the step trace recorded, collected per GPU, layer and
// phase into the ValidationInput that validate() compares with the measurements
// (validation.h; docs/calibration.md).
//
// The scenario is priced with the profile in place of its own [cost] (the profile's fits, the
// scenario's roofline parameters for kinds it lacks, and its [network] calibration applied to the
// topology); every step model comes from the replica builder (sim/serving/replica_builder.h), so
// the re-simulation prices a step exactly as a run of that scenario would.
#pragma once

#include "sim/calibration/measurement_reader.h"
#include "sim/calibration/step_trace_reader.h"
#include "sim/calibration/validation.h"
#include "sim/cost/profile.h"
#include "sim/scenario/scenario.h"

namespace moesim::sim {

// `scenario` priced by `profile` in place of its own [cost]: the profile's fits, the scenario's
// roofline parameters as the fallback, and its [network] calibration applied to the topology
// (cost_model_factory.h). Also what `moesim validate --serving` re-simulates with.
Scenario calibrated_scenario(const Scenario& scenario, const CalibrationProfile& profile);

// Re-simulates every step of `trace` whose step number `measurements` holds a step sample for,
// replica by replica in trace order, with the placement in force at that step (the header's,
// then each placement record from its step on) and the overlap schedule the trace records
// (its header's "overlap"; the scenario's [deployment] overlap when the header has none).
//
// Returns the input of validate(): the re-simulated steps with their per-GPU, per-layer phases,
// collectives and output head; the measured layer standing for each model layer (the layer
// itself when measured, else the first measured layer of the same signature); the MoE layers
// checked against the recorded combine bytes and those that differ; the calibrated cost model's
// out-of-range and proxy query counts. Its `measurements`, `profile` and `trace` point at the
// arguments: they must outlive the result.
//
// Throws ConfigError naming trace.file when the trace names a model other than the scenario's,
// when a replica of the trace spans another number of GPUs than the scenario deploys, when a
// sequence sits on a GPU that is not an attention rank of its replica, or for a placement with
// an expert that has no GPU in the replica (and RecordedRoutingModel's errors).
ValidationInput resimulate_recorded_steps(const Scenario& scenario,
                                          const CalibrationProfile& profile,
                                          const MeasurementSet& measurements,
                                          const StepTraceFile& trace);

}  // namespace moesim::sim

// resimulate_recorded_steps() on a recorded run: the tiny 2-GPU calibration scenario
// (scenarios/calibration/tiny-cpu-chat.toml, roofline cost) is simulated for a few steps with its
// step trace recorded, then re-simulated from that trace. A profile without fits prices every
// query with the roofline fallback, so it must reproduce the recorded step durations and routing
// exactly; a fitted profile must price the re-simulation; a placement record must apply from its
// step on; and mismatched inputs are ConfigErrors naming the trace.
#include "sim/calibration/resimulate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/calibration/step_trace_reader.h"
#include "sim/config/config_error.h"
#include "sim/output/run_outputs.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim {
namespace {

namespace fs = std::filesystem;
using output::write_step_trace;

constexpr int64_t kNumSteps = 12;

Scenario tiny_scenario() {
  Scenario sc =
      load_scenario(std::string(MOESIM_SOURCE_DIR) + "/scenarios/calibration/tiny-cpu-chat.toml");
  sc.run.duration_s = 0.05;
  return sc;
}

// Runs `sc` and reads back its recorded step trace (at most kNumSteps steps), written under the
// build directory in a file named for the calling test.
StepTraceFile record(const Scenario& sc) {
  RunOptions opt;
  opt.record_steps = true;
  opt.record_max_steps = kNumSteps;
  const RunOutput out = run_scenario(sc, opt);
  const fs::path dir = fs::path(MOESIM_BINARY_DIR) / "resimulate_test";
  fs::create_directories(dir);
  const fs::path path =
      dir / (std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + ".jsonl");
  {
    std::ofstream f(path);
    write_step_trace(f, sc, out, sc.run.seed);
  }
  return read_step_trace(path.string());
}

// Replay measurements of `steps` (every step of the trace when empty) with layers 0, 1 and 2
// measured.
MeasurementSet measurements_of(const StepTraceFile& trace, std::vector<int64_t> steps = {}) {
  MeasurementSet m;
  m.file = "meas.jsonl";
  m.mode = "replay";
  m.trace_file = trace.file;
  m.layer_scales = {{0, 1}, {1, 1}, {2, 1}};
  if (steps.empty()) {
    for (const TraceStep& t : trace.steps) steps.push_back(t.step);
  }
  for (int64_t s : steps) {
    StepSample sample;
    sample.step = s;
    m.steps.push_back(sample);
  }
  return m;
}

CalibrationProfile empty_profile() {
  CalibrationProfile p;
  p.name = "no-fits";
  return p;
}

// A profile whose only fit prices every dense FFN at a constant 1 ms.
CalibrationProfile dense_ffn_profile() {
  OpFit fit;
  fit.kind = "dense_ffn";
  fit.dtype = "bf16";
  fit.features = {FitFeature::kBytes};
  fit.segments = {FitSegment{}};
  fit.segments[0].intercept_s = 1e-3;
  fit.range = FitRange{0, 1e30, 0, 1e30, 0, 1e30};
  CalibrationProfile p;
  p.name = "dense-1ms";
  p.ops = {fit};
  return p;
}

// Expects a ConfigError naming `trace`'s file whose message holds `text`.
template <typename F>
void expect_trace_error(F&& f, const StepTraceFile& trace, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no ConfigError (expected one about " << text << ")";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.file(), trace.file);
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Resimulate, ProfileWithoutFitsReproducesRecordedSteps) {
  const Scenario sc = tiny_scenario();
  const StepTraceFile trace = record(sc);
  ASSERT_EQ(static_cast<int64_t>(trace.steps.size()), kNumSteps);
  const MeasurementSet meas = measurements_of(trace);
  const CalibrationProfile profile = empty_profile();
  const ValidationInput in = resimulate_recorded_steps(sc, profile, meas, trace);

  EXPECT_EQ(in.measurements, &meas);
  EXPECT_EQ(in.profile, &profile);
  EXPECT_EQ(in.trace, &trace);
  // Layers: 0 MLA dense, 1 KDA MoE, 2 and 3 MLA MoE; layer 2 stands in for layer 3.
  EXPECT_EQ(in.measured_layer_of_layer, (std::vector<int32_t>{0, 1, 2, 2}));
  EXPECT_EQ(in.is_moe_layer, (std::vector<bool>{false, true, true, true}));

  ASSERT_EQ(in.steps.size(), trace.steps.size());
  for (size_t i = 0; i < in.steps.size(); ++i) {
    const ResimulatedStep& s = in.steps[i];
    const TraceStep& t = trace.steps[i];
    EXPECT_EQ(s.step, t.step);
    EXPECT_EQ(s.replica, 0);
    EXPECT_EQ(s.gpus, (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(s.duration_s, to_seconds(t.end_ns - t.start_ns)) << "step " << t.step;
    ASSERT_EQ(s.phase_s.size(), 2u);
    ASSERT_EQ(s.phase_s[0].size(), 4u);
    EXPECT_GT(s.phase_s[0][0][static_cast<int>(Phase::kDenseFfn)] +
                  s.phase_s[1][0][static_cast<int>(Phase::kDenseFfn)],
              0.0);
    EXPECT_GT(s.dispatch_s[1], 0.0);
    EXPECT_EQ(s.dispatch_s[0], 0.0);  // dense layer
  }
  EXPECT_EQ(in.num_moe_layers_checked, 3 * kNumSteps);
  EXPECT_EQ(in.num_routing_mismatches, 0);
  // Every query fell back to the roofline: counted by the builder's calibrated model.
  EXPECT_GT(in.num_out_of_range_queries, 0);
  EXPECT_EQ(in.num_proxy_queries, 0);
}

// A run under a micro-batch schedule records it and the SMs its collectives held in the trace
// header; the re-simulation uses them even when the scenario it is given says none, reproduces
// the recorded steps and routing, and validation's composition of the re-simulated stage costs
// (full-rate work: the time lost to SM sharing taken off the spans) on the same timeline gives
// the step model's durations back (to the nanosecond rounding of the spans).
TEST(Resimulate, RecordedOverlapScheduleIsUsed) {
  for (const auto& [mode, comm_sms] : {std::pair{OverlapMode::kTwoMicrobatch, 0},
                                       {OverlapMode::kDecodePipeline, 0},
                                       {OverlapMode::kTwoMicrobatch, 24},
                                       {OverlapMode::kDecodePipeline, 24}}) {
    SCOPED_TRACE(comm_sms);
    Scenario sc = tiny_scenario();
    sc.deployment.overlap = mode;
    sc.deployment.comm_sms = comm_sms;
    const StepTraceFile trace = record(sc);
    EXPECT_EQ(trace.overlap, overlap_mode_name(mode));
    EXPECT_EQ(trace.comm_sms, comm_sms);
    const MeasurementSet meas = measurements_of(trace);
    const CalibrationProfile profile = empty_profile();
    const ValidationInput in = resimulate_recorded_steps(tiny_scenario(), profile, meas, trace);
    ASSERT_EQ(in.steps.size(), trace.steps.size());
    for (size_t i = 0; i < in.steps.size(); ++i) {
      const TraceStep& t = trace.steps[i];
      EXPECT_EQ(in.steps[i].overlap, mode);
      EXPECT_EQ(in.steps[i].duration_s, to_seconds(t.end_ns - t.start_ns)) << "step " << t.step;
      ASSERT_GT(in.steps[i].stage_costs.size(), 1u);
      EXPECT_GT(in.steps[i].stage_costs[1].comm(1, StageOp::kDispatch), 0.0);
    }
    EXPECT_EQ(in.num_routing_mismatches, 0);
    const ValidationReport r = validate(in);
    EXPECT_LT(r.max_composition_error_s, 1e-7) << overlap_mode_name(mode);
    EXPECT_NE(r.overlap_note.find(overlap_mode_name(mode)), std::string::npos) << r.overlap_note;
    EXPECT_NE(r.overlap_note.find("without overlap"), std::string::npos) << r.overlap_note;
  }
}

TEST(Resimulate, OnlyMeasuredStepsAreResimulated) {
  const Scenario sc = tiny_scenario();
  const StepTraceFile trace = record(sc);
  ASSERT_GE(trace.steps.size(), 4u);
  const MeasurementSet meas = measurements_of(trace, {trace.steps[1].step, trace.steps[3].step});
  const CalibrationProfile profile = empty_profile();
  const ValidationInput in = resimulate_recorded_steps(sc, profile, meas, trace);
  ASSERT_EQ(in.steps.size(), 2u);
  EXPECT_EQ(in.steps[0].step, trace.steps[1].step);
  EXPECT_EQ(in.steps[1].step, trace.steps[3].step);
  EXPECT_EQ(in.num_moe_layers_checked, 6);
}

TEST(Resimulate, ProfilePricesTheResimulation) {
  const Scenario sc = tiny_scenario();
  const StepTraceFile trace = record(sc);
  const MeasurementSet meas = measurements_of(trace);
  const CalibrationProfile profile = dense_ffn_profile();
  const ValidationInput in = resimulate_recorded_steps(sc, profile, meas, trace);
  ASSERT_EQ(in.steps.size(), trace.steps.size());
  for (size_t i = 0; i < in.steps.size(); ++i) {
    const ResimulatedStep& s = in.steps[i];
    const TraceStep& t = trace.steps[i];
    // Roofline dense FFNs of a tiny batch take microseconds; the profile's take 1 ms.
    EXPECT_GT(s.duration_s, to_seconds(t.end_ns - t.start_ns) + 0.5e-3) << "step " << t.step;
    for (size_t g = 0; g < s.gpus.size(); ++g) {
      const double dense = s.phase_s[g][0][static_cast<int>(Phase::kDenseFfn)];
      if (dense > 0) {
        EXPECT_DOUBLE_EQ(dense, 1e-3);
      }
    }
  }
}

TEST(Resimulate, PlacementRecordAppliesFromItsStep) {
  const Scenario sc = tiny_scenario();
  const StepTraceFile recorded = record(sc);
  ASSERT_EQ(static_cast<int64_t>(recorded.steps.size()), kNumSteps);
  const MeasurementSet meas = measurements_of(recorded);
  const CalibrationProfile profile = empty_profile();
  // Every routed expert replicated on both GPUs: 16 slots per GPU instead of 8.
  const std::vector<std::vector<int32_t>> everywhere(recorded.expert_gpus.size(), {0, 1});
  ASSERT_EQ(recorded.expert_gpus.size(), 16u);
  ASSERT_NE(recorded.expert_gpus, everywhere);
  const int64_t change_step = recorded.steps[kNumSteps / 2].step;

  StepTraceFile replicated = recorded;  // the new placement from the start
  replicated.expert_gpus = everywhere;
  StepTraceFile changed = recorded;  // the recorded placement, then the new one
  changed.placement_changes = {TracePlacementChange{0, change_step, -1, everywhere}};

  const ValidationInput a = resimulate_recorded_steps(sc, profile, meas, recorded);
  const ValidationInput b = resimulate_recorded_steps(sc, profile, meas, replicated);
  const ValidationInput c = resimulate_recorded_steps(sc, profile, meas, changed);
  ASSERT_EQ(a.steps.size(), static_cast<size_t>(kNumSteps));
  ASSERT_EQ(b.steps.size(), a.steps.size());
  ASSERT_EQ(c.steps.size(), a.steps.size());
  int num_differing = 0;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const ResimulatedStep& expected = c.steps[i].step < change_step ? a.steps[i] : b.steps[i];
    EXPECT_EQ(c.steps[i].duration_s, expected.duration_s) << "step " << c.steps[i].step;
    EXPECT_EQ(c.steps[i].phase_s, expected.phase_s) << "step " << c.steps[i].step;
    if (c.steps[i].step >= change_step && a.steps[i].phase_s != b.steps[i].phase_s) {
      ++num_differing;
    }
  }
  // The two placements price the steps after the change differently (else the test is void).
  EXPECT_GT(num_differing, 0);
}

TEST(Resimulate, TraceOfAnotherModelIsAConfigError) {
  const Scenario sc = tiny_scenario();
  StepTraceFile trace = record(sc);
  trace.model = "not-tiny";
  const MeasurementSet meas = measurements_of(trace);
  const CalibrationProfile profile = empty_profile();
  expect_trace_error([&] { resimulate_recorded_steps(sc, profile, meas, trace); }, trace,
                     "trace model 'not-tiny' differs from the scenario's 'tiny'");
}

TEST(Resimulate, ReplicaWithOtherGpuCountIsAConfigError) {
  const Scenario sc = tiny_scenario();
  StepTraceFile trace = record(sc);
  trace.replica_gpus[0] = {0};
  const MeasurementSet meas = measurements_of(trace);
  const CalibrationProfile profile = empty_profile();
  expect_trace_error([&] { resimulate_recorded_steps(sc, profile, meas, trace); }, trace,
                     "replica 0 has 1 GPUs; the scenario deploys 2");
}

TEST(Resimulate, SequenceOffAnAttentionRankIsAConfigError) {
  const CalibrationProfile profile = empty_profile();
  const Scenario dp = tiny_scenario();
  const StepTraceFile recorded = record(dp);
  const MeasurementSet meas = measurements_of(recorded);
  // A GPU outside the replica.
  StepTraceFile outside = recorded;
  outside.steps[0].sequences[0].gpu = 5;
  expect_trace_error([&] { resimulate_recorded_steps(dp, profile, meas, outside); }, outside,
                     "GPU 5 is not an attention rank");
  // Tensor-parallel attention over both GPUs: GPU 1 holds no rank.
  Scenario tp = dp;
  tp.deployment.attention = AttentionParallel::kTensor;
  tp.deployment.attention_tp = 2;
  StepTraceFile on_second = recorded;
  on_second.steps[0].sequences[0].gpu = 1;
  expect_trace_error([&] { resimulate_recorded_steps(tp, profile, meas, on_second); }, on_second,
                     "GPU 1 is not an attention rank");
}

}  // namespace
}  // namespace moesim::sim

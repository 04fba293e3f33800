// Writers for a run's outputs. All take a std::ostream; the CLI decides file names.
//   summary        text and JSON (run_summary.h, included here)
//   requests CSV   one row per arrived request
//   Chrome trace   JSON trace-event format (opens in Perfetto): one track per GPU
//   step trace     JSONL, docs/schemas/step_trace.md (what the engine replays)
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <utility>

#include "sim/output/run_summary.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim::output {

// requests.csv while the run goes (a RequestSink, RunOptions::request_sinks): the header at
// construction, then one row per record as it becomes final, in request-sequence order.
class RequestsCsvWriter final : public RequestSink {
 public:
  explicit RequestsCsvWriter(std::ostream& os);
  void add(const RequestRecord& record, SimTime end_ns) override;

 private:
  std::ostream& os_;
};
// requests.csv of a run that kept its records (RunOptions::keep_requests).
void write_requests_csv(std::ostream& os, const RunOutput& out);

// steps.csv while the run goes (a StepSeriesSink, RunOptions::step_series_sink): the header at
// construction, then one row per executed step.
class StepsCsvWriter final : public StepSeriesSink {
 public:
  explicit StepsCsvWriter(std::ostream& os);
  void add(const StepSeriesRow& row) override;

 private:
  std::ostream& os_;
};
// steps.csv of a run that kept its step series (RunOptions::step_series).
void write_steps_csv(std::ostream& os, const RunOutput& out);

// The Chrome trace while the run goes (a TraceSink, RunOptions::trace_sink): one process per
// replica, named "replica R" plus its role ("prefill" / "decode" under P/D disaggregation, "pool
// NAME" with pools) from `deployment` when given, one track per GPU named when it first appears.
// finish() closes the document; nothing is held but the set of named tracks.
class ChromeTraceWriter final : public TraceSink {
 public:
  ChromeTraceWriter(std::ostream& os, const DeploymentSpec* deployment);
  void add(std::span<const TraceSlice> slices) override;
  void finish();

 private:
  void event(const nlohmann::json& e);
  std::ostream& os_;
  int64_t num_events_ = 0;
  std::set<std::pair<int32_t, int32_t>> named_;  // (replica, gpu) tracks named so far
};
// The same document from a run that collected its slices (RunOutput::trace).
void write_chrome_trace(std::ostream& os, const RunOutput& out,
                        const DeploymentSpec* deployment = nullptr);
// The header both traces start with (docs/schemas/step_trace.md): record "header", `schema`,
// moesim_version, scenario, seed, overlap, comm_sms, model, topology, replicas and placement (MoE
// layer 0's at the start). --record and --export-requests both write it through this function.
nlohmann::json trace_header_json(const std::string& schema, const Scenario& sc,
                                 const RunOutput& out, uint64_t seed);
// Header with the model shapes, topology, replicas and placement, then one line per step.
void write_step_trace(std::ostream& os, const Scenario& sc, const RunOutput& out, uint64_t seed);
// The model card as the step-trace header's "model" object.
nlohmann::json model_shapes_json(const ModelCard& card, const DeploymentSpec& d);

}  // namespace moesim::sim::output

// Measurement records (docs/schemas/measurement.md, schema "moesim.measurements.v1"): one
// header, one record per (step, simulated GPU, layer, op), one record per (step, simulated GPU).
// The writer only formats; what to measure is the replay's business.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend.h"
#include "engine/op_cost.h"

namespace moesim::engine {

inline constexpr std::string_view kMeasurementSchema = "moesim.measurements.v1";

// A layer the replay ran and how many model layers it stands for.
struct LayerRun {
  int64_t layer_idx = 0;
  int64_t scale = 1;
};

struct MeasurementHeader {
  std::string mode = "replay";  // "replay" or "bench"
  std::string backend;
  std::string device;
  DevicePeaks peaks;
  std::string engine_version;
  std::string trace_file;  // "" for bench
  std::string scenario;
  std::string model;
  std::string replay_profile;  // the --layers value, e.g. "sample"
  std::vector<LayerRun> layers_run;
  std::vector<int32_t> sim_gpus;
  int warmup = 0;
  int repeats = 0;
  uint64_t seed = 0;
  // How ops were timed (engine/timing.h), written as the header's "timing" object.
  std::string estimator = "min";
  double max_wait_fraction = 0.1;
  int max_extra_runs = 0;
  bool pinned = false;
  bool interleaved = false;  // ops timed in rounds of the whole step
};

struct OpRecord {
  int64_t step_idx = 0;
  int64_t replica_idx = 0;
  int32_t sim_gpu = 0;
  int64_t layer_idx = 0;
  int64_t layer_scale = 1;
  OpKind op = OpKind::kRmsnorm;
  int64_t tokens = 0;  // rows the op processed (expert_ffn: received token copies)
  int64_t context_tokens_sum = 0;
  int64_t context_tokens_max = 0;
  int64_t num_sequences = 0;
  std::vector<int64_t> tokens_per_expert;  // expert_ffn only: one entry per local expert
  std::vector<int32_t> experts;            // expert_ffn only: the local experts' global ids
  OpCost cost;
  std::string dtype;        // storage dtype the op ran with (weights for GEMM ops)
  std::string trace_dtype;  // the dtype the trace asked for
  bool measured = false;
  int64_t measured_ns = 0;  // `estimator` over the clean samples; meaningful only when measured
  int64_t min_ns = 0;       // over the clean samples
  int64_t max_ns = 0;
  // Timing detail (engine/timing.h); written only when measured and the estimator is set.
  std::string estimator;           // "" leaves every field below out
  std::optional<int64_t> wait_ns;  // run-queue wait of the reported sample(s); null: unknown
  bool noisy = false;
  int64_t retries = 0;                   // timed runs beyond the repeats
  std::vector<int64_t> samples_ns;       // every timed run in run order
  std::vector<int64_t> samples_wait_ns;  // the wait around each; empty when unknown
};

struct StepRecord {
  int64_t step_idx = 0;
  int64_t replica_idx = 0;
  int32_t sim_gpu = 0;
  int64_t num_ops = 0;
  int64_t num_not_measured = 0;
  int64_t measured_ns_sum = 0;  // sum of measured_ns over the ops run
  int64_t scaled_ns_sum = 0;    // sum of measured_ns * layer_scale: the whole model's layers
  int64_t sim_step_ns = 0;      // from the trace
};

class MeasurementWriter {
 public:
  // Writes to `out`, which must outlive the writer.
  explicit MeasurementWriter(std::ostream& out) : out_(out) {}
  void write_header(const MeasurementHeader& header);
  // Op records repeat the header's backend and device (write_header first).
  void write_op(const OpRecord& record);
  void write_step(const StepRecord& record);
  // Appends the op and step records another writer produced (its output without the header line:
  // complete lines, one record each), e.g. one rank's share of a multi-rank replay.
  void append_records(std::string_view records_jsonl);
  int64_t num_records() const { return num_records_; }

 private:
  std::ostream& out_;
  int64_t num_records_ = 0;
  std::string backend_;  // from the header, repeated in every op record
  std::string device_;
};

}  // namespace moesim::engine

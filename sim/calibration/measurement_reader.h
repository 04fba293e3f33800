// Engine measurements (docs/schemas/measurement.md, `moesim.measurements.v1`) read back into
// plain structs for calibration and validation. Reading happens at the edge (the calibrate and
// validate commands); models never read files.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include "sim/calibration/network_fit.h"

namespace moesim::sim {

// One `op` record: an operation the engine ran on one simulated GPU for one layer of one step.
struct OpSample {
  int64_t step = 0;
  int32_t replica = 0;
  int32_t sim_gpu = 0;
  int32_t layer_idx = 0;
  int32_t layer_scale = 1;  // model layers this measured layer stands for (replay profile)
  std::string op;           // engine vocabulary, e.g. "attn_kda_prefill", "unpermute"
  std::string dtype;        // storage format the op ran with
  int64_t tokens = 0;
  int64_t context_tokens_sum = 0;
  int64_t context_tokens_max = 0;
  int64_t num_sequences = 0;
  int64_t num_active_experts = 0;  // expert_ffn: local experts with at least one token
  double flops = 0;
  double weight_bytes = 0;
  double activation_bytes = 0;
  double kv_bytes = 0;
  double bytes = 0;
  bool measured = false;
  int64_t measured_ns = 0;  // the record's estimator over its samples; 0 when !measured
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  // Timing detail of newer engines (all optional; older files: "", unknown, false, 0).
  std::string estimator;  // "min", "median", "trimmed_mean"; "" = median (older files)
  int64_t wait_ns = -1;   // run-queue wait of the reported sample(s); -1 = unknown
  bool noisy = false;     // the engine could not collect its clean samples
  int64_t retries = 0;    // timed runs beyond the repeats
};

// One `step` record: the totals of one simulated GPU for one step.
struct StepSample {
  int64_t step = 0;
  int32_t replica = 0;
  int32_t sim_gpu = 0;
  int64_t num_ops = 0;
  int64_t num_not_measured = 0;
  int64_t measured_ns_sum = 0;
  int64_t scaled_ns_sum = 0;  // sum of measured_ns * layer_scale: the whole model's compute
  int64_t sim_step_ns = 0;
};

// One `gemm` record: a timed GEMM kernel (e.g. a DeepGEMM benchmark row) for the compute fit.
struct GemmSample {
  std::string layout;  // "contiguous_grouped", "masked_grouped", "dense"
  std::string dtype;   // "fp8", "bf16"
  int64_t num_groups = 1;
  int64_t m_per_group = 0;
  int64_t n = 0;
  int64_t k = 0;
  double measured_s = 0;
};

// One `attention_core` record: a timed attention-core kernel (e.g. FlashMLA decode) of `flops`
// FLOPs at `dtype` and `bytes` HBM bytes; `bound` says which of the two limits it ("memory" or
// "compute"): the fit reads the efficiency of that limit from it. Prefill kernels also give
// `queries` (query tokens) and `pairs` ((query, key) pairs attended): compute-bound records
// with them are fitted with a fixed cost per query (compute_fit.h).
struct AttentionCoreSample {
  std::string op;     // cost-model attention kind, e.g. "attn_mla_decode"
  std::string dtype;  // the core's math dtype
  std::string bound;  // "memory" or "compute"
  double flops = 0;
  double bytes = 0;
  double measured_s = 0;
  double queries = 0;  // 0 when not given
  double pairs = 0;    // 0 when not given
};

struct MeasurementSet {
  std::string file;
  std::string mode;     // "replay" or "bench"
  std::string backend;  // "cpu", "cuda"
  std::string device;
  std::string trace_file;  // the step trace the replay played (replay mode)
  std::string scenario;
  std::string model;
  std::string replay_profile;  // "all", "sample", ...
  int64_t repeats = 0;
  std::map<int32_t, int32_t> layer_scales;  // layers run -> scale
  std::vector<int32_t> sim_gpus;            // the simulated GPUs played (header)
  std::vector<OpSample> ops;
  std::vector<StepSample> steps;
  // `collective` records: measured all-to-alls for the network fit (source = the file).
  std::vector<CollectiveSample> collectives;
  // `gemm` and `attention_core` records: kernel timings for the compute fit.
  std::vector<GemmSample> gemms;
  std::vector<AttentionCoreSample> attention_cores;
};

// Reads a measurement file. Throws ConfigError naming FILE, line and field for a malformed
// record or a header whose schema is not moesim.measurements.v1. `bench` records are read as op
// samples with step = -1 (they carry op, tokens, flops, bytes and times); `collective` records
// (ep_size, bytes_per_gpu, measured_ns) as CollectiveSamples; `gemm` and `attention_core`
// records as GemmSamples and AttentionCoreSamples.
MeasurementSet read_measurements(const std::string& path);
// Reads from a stream; `name` stands for the file in error messages.
MeasurementSet read_measurements(std::istream& in, const std::string& name);

}  // namespace moesim::sim

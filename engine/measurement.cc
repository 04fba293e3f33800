#include "engine/measurement.h"

#include <nlohmann/json.hpp>

namespace moesim::engine {

using json = nlohmann::ordered_json;

namespace {

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

void MeasurementWriter::write_header(const MeasurementHeader& h) {
  json layers = json::array();
  for (const LayerRun& l : h.layers_run)
    layers.push_back({{"layer", l.layer_idx}, {"scale", l.scale}});
  json j = {{"record", "header"},
            {"schema", kMeasurementSchema},
            {"mode", h.mode},
            {"backend", h.backend},
            {"device", h.device},
            {"peaks",
             {{"bf16_flops_per_s", optional_number(h.peaks.bf16_flops_per_s)},
              {"fp8_flops_per_s", optional_number(h.peaks.fp8_flops_per_s)},
              {"fp32_flops_per_s", optional_number(h.peaks.fp32_flops_per_s)},
              {"memory_bytes_per_s", optional_number(h.peaks.memory_bytes_per_s)}}},
            {"engine_version", h.engine_version},
            {"trace_file", h.trace_file},
            {"scenario", h.scenario},
            {"model", h.model},
            {"replay_profile", h.replay_profile},
            {"layers_run", layers},
            {"sim_gpus", h.sim_gpus},
            {"warmup", h.warmup},
            {"repeats", h.repeats},
            {"seed", h.seed},
            {"timing",
             {{"estimator", h.estimator},
              {"max_wait_fraction", h.max_wait_fraction},
              {"max_extra_runs", h.max_extra_runs},
              {"pinned", h.pinned},
              {"interleaved", h.interleaved}}}};
  out_ << j.dump() << '\n';
  ++num_records_;
  backend_ = h.backend;
  device_ = h.device;
}

void MeasurementWriter::write_op(const OpRecord& r) {
  json j = {{"record", "op"},
            {"step", r.step_idx},
            {"replica", r.replica_idx},
            {"sim_gpu", r.sim_gpu},
            {"layer", r.layer_idx},
            {"layer_scale", r.layer_scale},
            {"op", op_kind_name(r.op)},
            {"tokens", r.tokens},
            {"context_tokens_sum", r.context_tokens_sum},
            {"context_tokens_max", r.context_tokens_max},
            {"num_sequences", r.num_sequences},
            {"flops", r.cost.flops},
            {"weight_bytes", r.cost.weight_bytes},
            {"activation_bytes", r.cost.activation_bytes},
            {"kv_bytes", r.cost.kv_bytes},
            {"bytes", r.cost.total_bytes()},
            {"dtype", r.dtype},
            {"trace_dtype", r.trace_dtype},
            {"measured", r.measured},
            {"measured_ns", r.measured ? json(r.measured_ns) : json(nullptr)},
            {"backend", backend_},
            {"device", device_}};
  if (r.measured) {
    j["min_ns"] = r.min_ns;
    j["max_ns"] = r.max_ns;
    if (!r.estimator.empty()) {
      j["estimator"] = r.estimator;
      j["wait_ns"] = r.wait_ns ? json(*r.wait_ns) : json(nullptr);
      j["noisy"] = r.noisy;
      j["retries"] = r.retries;
      j["samples_ns"] = r.samples_ns;
      if (!r.samples_wait_ns.empty()) j["samples_wait_ns"] = r.samples_wait_ns;
    }
  }
  if (r.op == OpKind::kExpertFfn) {
    j["experts"] = r.experts;
    j["tokens_per_expert"] = r.tokens_per_expert;
  }
  out_ << j.dump() << '\n';
  ++num_records_;
}

void MeasurementWriter::write_step(const StepRecord& r) {
  json j = {{"record", "step"},
            {"step", r.step_idx},
            {"replica", r.replica_idx},
            {"sim_gpu", r.sim_gpu},
            {"num_ops", r.num_ops},
            {"num_not_measured", r.num_not_measured},
            {"measured_ns_sum", r.measured_ns_sum},
            {"scaled_ns_sum", r.scaled_ns_sum},
            {"sim_step_ns", r.sim_step_ns}};
  out_ << j.dump() << '\n';
  ++num_records_;
}

void MeasurementWriter::append_records(std::string_view records_jsonl) {
  for (char c : records_jsonl) num_records_ += c == '\n' ? 1 : 0;
  out_ << records_jsonl;
}

}  // namespace moesim::engine

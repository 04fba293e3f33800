// The run's other outputs: the requests CSV, the Chrome trace and the step trace (JSONL) the
// engine replays.
#include "sim/output/run_outputs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>

#include "moesim_version.h"
#include "sim/metrics/figure_text.h"
#include "sim/network/traffic_matrix.h"

namespace moesim::sim::output {
namespace {

using nlohmann::json;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

}  // namespace

RequestsCsvWriter::RequestsCsvWriter(std::ostream& os) : os_(os) {
  os_ << "request_id,session_id,turn_idx,attempt_idx,replica,domain,outcome,reject_reason,"
         "arrival_ns,first_scheduled_ns,first_token_ns,done_ns,prompt_tokens,output_tokens,"
         "generated_tokens,cached_prompt_tokens,preemptions,queueing_ms,ttft_ms,tpot_ms,e2e_ms,"
         "loaded_prompt_tokens,kv_load_ms,prefill_ms\n";
}

void RequestsCsvWriter::add(const RequestRecord& r, SimTime /*end_ns*/) {
  std::ostream& os = os_;
  os << r.request_id << ',' << r.session_id << ',' << r.turn_idx << ',' << r.attempt_idx << ','
     << r.replica << ',' << r.domain << ',' << request_outcome_name(r.outcome) << ','
     << r.reject_reason << ',' << r.arrival_ns << ',' << r.first_scheduled_ns << ','
     << r.first_token_ns << ',' << r.done_ns << ',' << r.prompt_tokens << ',' << r.output_tokens
     << ',' << r.generated_tokens << ',' << r.cached_prompt_tokens << ',' << r.num_preemptions
     << ',';
  auto ms = [&os](double ns) {
    if (ns >= 0) os << fmt("%.6f", ns / 1e6);
  };
  ms(static_cast<double>(r.queueing_ns()));
  os << ',';
  ms(static_cast<double>(r.ttft_ns()));
  os << ',';
  ms(r.tpot_ns());
  os << ',';
  ms(static_cast<double>(r.e2e_ns()));
  os << ',' << r.loaded_prompt_tokens << ',';
  ms(r.first_scheduled_ns >= 0 ? static_cast<double>(r.kv_load_ns) : -1.0);
  os << ',';
  ms(static_cast<double>(r.prefill_ns()));
  os << '\n';
}

void write_requests_csv(std::ostream& os, const RunOutput& out) {
  RequestsCsvWriter writer(os);
  for (const RequestRecord& r : out.requests) writer.add(r, out.end_ns);
}

// The document is {"displayTimeUnit":"ns","traceEvents":[...]} (keys in nlohmann's sorted
// order), written one event at a time.
ChromeTraceWriter::ChromeTraceWriter(std::ostream& os, const DeploymentSpec* deployment) : os_(os) {
  os_ << R"({"displayTimeUnit":"ns","traceEvents":[)";
  if (!deployment) return;
  // Process names (and their order) so that replicas and their roles tell apart in Perfetto.
  int32_t pool = 0, pool_first = 0;
  for (int32_t r = 0; r < deployment->num_replicas; ++r) {
    std::string name = "replica " + std::to_string(r);
    if (deployment->prefill_replicas > 0) {
      name += r < deployment->prefill_replicas ? " (prefill)" : " (decode)";
    }
    if (!deployment->pools.empty()) {
      while (pool + 1 < static_cast<int32_t>(deployment->pools.size()) &&
             r >= pool_first + deployment->pools[pool].num_replicas) {
        pool_first += deployment->pools[pool].num_replicas;
        ++pool;
      }
      name += " (pool " + deployment->pools[pool].name + ")";
    }
    event({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"args", {{"name", name}}}});
    event({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"args", {{"sort_index", r}}}});
  }
}

StepsCsvWriter::StepsCsvWriter(std::ostream& os) : os_(os) {
  os_ << "replica,step,start_ns,duration_ns,num_seqs,prefill_tokens,decode_tokens,"
         "kv_owned_blocks,kv_cached_blocks,kv_blocks,kv_used_fraction_max,compute_ns_mean,"
         "comm_ns_mean,wait_ns_mean,wait_ns_max\n";
}

void StepsCsvWriter::add(const StepSeriesRow& s) {
  os_ << s.replica << ',' << s.step << ',' << s.start_ns << ',' << s.duration_ns << ','
      << s.num_seqs << ',' << s.prefill_tokens << ',' << s.decode_tokens << ',' << s.kv_owned_blocks
      << ',' << s.kv_cached_blocks << ',' << s.kv_blocks << ','
      << fmt("%.6f", s.kv_used_fraction_max) << ',' << fmt("%.0f", s.compute_ns_mean) << ','
      << fmt("%.0f", s.comm_ns_mean) << ',' << fmt("%.0f", s.wait_ns_mean) << ',' << s.wait_ns_max
      << '\n';
}

void write_steps_csv(std::ostream& os, const RunOutput& out) {
  StepsCsvWriter writer(os);
  for (const StepSeriesRow& s : out.step_series) writer.add(s);
}

void ChromeTraceWriter::event(const json& e) {
  if (num_events_++ > 0) os_ << ',';
  os_ << e.dump();
}

void ChromeTraceWriter::add(std::span<const TraceSlice> slices) {
  for (const TraceSlice& t : slices) {
    if (t.gpu < 0) {
      event({{"ph", "i"},
             {"s", "p"},
             {"name", t.name},
             {"pid", t.replica},
             {"tid", 0},
             {"ts", static_cast<double>(t.start_ns) / 1e3}});
      continue;
    }
    if (named_.insert({t.replica, t.gpu}).second) {
      event({{"ph", "M"},
             {"name", "thread_name"},
             {"pid", t.replica},
             {"tid", t.gpu},
             {"args", {{"name", "gpu " + std::to_string(t.gpu)}}}});
    }
    json e{{"ph", "X"},
           {"name", t.name},
           {"pid", t.replica},
           {"tid", t.gpu},
           {"ts", static_cast<double>(t.start_ns) / 1e3},
           {"dur", static_cast<double>(t.duration_ns) / 1e3}};
    if (t.layer >= 0) e["args"] = {{"layer", t.layer}};
    // docs/outputs.md: a compute span slowed by SM sharing shows its share and the time lost.
    if (t.sm_lost_ns > 0) {
      e["args"]["sm_share"] = t.sm_share;
      e["args"]["sm_lost_us"] = static_cast<double>(t.sm_lost_ns) / 1e3;
    }
    event(e);
  }
}

void ChromeTraceWriter::finish() { os_ << "]}\n"; }

void write_chrome_trace(std::ostream& os, const RunOutput& out, const DeploymentSpec* deployment) {
  ChromeTraceWriter writer(os, deployment);
  writer.add(out.trace);
  writer.finish();
}

json model_shapes_json(const ModelCard& card, const DeploymentSpec& d) {
  json m;
  m["name"] = card.name;
  m["hidden_size"] = card.hidden_size;
  m["vocab_size"] = card.vocab_size;
  const Precision& p = card.precision;
  m["dtypes"] = {{"attention", dtype_name(p.attention)},
                 {"dense_ffn", dtype_name(p.dense_ffn)},
                 {"experts", dtype_name(p.routed_experts)},
                 {"shared_experts", dtype_name(p.shared_experts)},
                 {"kv_cache", dtype_name(p.kv_cache)},
                 {"state", dtype_name(p.recurrent_state)},
                 {"dispatch", wire_dtype_name(d.dispatch_dtype)},
                 {"combine", wire_dtype_name(d.combine_dtype)}};
  json layers = json::array();
  for (size_t i = 0; i < card.layers.size(); ++i) {
    const LayerSpec& l = card.layers[i];
    json a;
    switch (l.attention.kind) {
      case AttentionKind::kMLA: {
        const MlaSpec& x = l.attention.mla;
        a = {{"kind", "mla"},
             {"num_heads", x.num_heads},
             {"q_lora_rank", x.q_lora_rank},
             {"kv_lora_rank", x.kv_lora_rank},
             {"qk_nope_head_dim", x.qk_nope_head_dim},
             {"qk_rope_head_dim", x.qk_rope_head_dim},
             {"v_head_dim", x.v_head_dim}};
        break;
      }
      case AttentionKind::kGQA: {
        const GqaSpec& x = l.attention.gqa;
        a = {{"kind", "gqa"},
             {"num_heads", x.num_heads},
             {"num_kv_heads", x.num_kv_heads},
             {"head_dim", x.head_dim},
             {"qk_norm", x.qk_norm}};
        break;
      }
      case AttentionKind::kKDA: {
        const KdaSpec& x = l.attention.kda;
        a = {{"kind", "kda"},
             {"num_heads", x.num_heads},
             {"head_dim_k", x.head_dim_k},
             {"head_dim_v", x.head_dim_v},
             {"short_conv_kernel", x.short_conv_kernel},
             {"gate_lora_rank", x.gate_lora_rank},
             {"output_gate", x.output_gate}};
        break;
      }
    }
    json f;
    if (l.ffn.is_moe) {
      const MoeSpec& x = l.ffn.moe;
      f = {{"kind", "moe"},
           {"num_routed_experts", x.num_routed_experts},
           {"top_k", x.top_k},
           {"num_shared_experts", x.num_shared_experts},
           {"expert_intermediate_size", x.expert_intermediate_size},
           {"shared_intermediate_size", x.shared_intermediate_size},
           {"scoring", scoring_func_name(x.scoring)}};
    } else {
      f = {{"kind", "dense"}, {"intermediate_size", l.ffn.intermediate_size}};
    }
    layers.push_back({{"layer", i}, {"attention", a}, {"ffn", f}});
  }
  m["layers"] = layers;
  return m;
}

namespace {

// Slots per GPU: the most experts any GPU hosts (the engine sizes every GPU's weights so).
json placement_json(const std::vector<std::vector<int32_t>>& expert_gpus) {
  std::map<int32_t, int32_t> slots_of_gpu;
  int32_t max_slots = 0;
  for (const auto& e : expert_gpus) {
    for (int32_t g : e) max_slots = std::max(max_slots, ++slots_of_gpu[g]);
  }
  return json{{"num_slots_per_gpu", max_slots}, {"expert_gpus", expert_gpus}};
}

}  // namespace

json trace_header_json(const std::string& schema, const Scenario& sc, const RunOutput& out,
                       uint64_t seed) {
  const DeploymentSpec& d = sc.deployment;
  json h;
  h["record"] = "header";
  h["schema"] = schema;
  h["moesim_version"] = MOESIM_VERSION;
  h["scenario"] = sc.name;
  h["seed"] = seed;
  h["overlap"] = overlap_mode_name(d.overlap);  // the schedule the steps were timed with
  h["comm_sms"] = d.comm_sms;  // the SMs its collectives held (docs/serving.md, "SM sharing")
  h["model"] = model_shapes_json(*sc.model, d);
  const Topology& t = *sc.topology;
  h["topology"] = {{"name", t.name()},
                   {"num_gpus", t.num_gpus()},
                   {"gpus_per_node", t.gpus_per_node()},
                   {"gpu", t.gpu_spec().name}};
  json reps = json::array();
  for (int32_t r = 0; r < d.num_replicas; ++r) {
    json gpus = json::array();
    for (int32_t g = 0; g < d.gpus_per_replica; ++g) gpus.push_back(r * d.gpus_per_replica + g);
    reps.push_back({{"replica", r},
                    {"gpus", gpus},
                    {"attention", d.attention == AttentionParallel::kData ? "dp" : "tp"},
                    {"attention_tp", d.attention_tp},
                    {"ep_size", d.gpus_per_replica}});
  }
  h["replicas"] = reps;
  h["placement"] = placement_json(out.expert_gpus);
  return h;
}

void write_step_trace(std::ostream& os, const Scenario& sc, const RunOutput& out, uint64_t seed) {
  os << trace_header_json("moesim.step_trace.v1", sc, out, seed).dump() << "\n";
  // A per-layer placement record names its layer by the model's layer index.
  std::vector<int32_t> moe_layer_ids;
  for (size_t i = 0; i < sc.model->layers.size(); ++i) {
    if (sc.model->layers[i].ffn.is_moe) moe_layer_ids.push_back(static_cast<int32_t>(i));
  }
  size_t next_change = 0;
  for (const StepRecord& s : out.steps) {
    // A replica's placement changed before this step: a placement record for its steps.
    while (next_change < out.placement_changes.size() &&
           out.placement_changes[next_change].replica == s.replica &&
           out.placement_changes[next_change].step == s.step) {
      const RunOutput::PlacementChange& c = out.placement_changes[next_change++];
      json p = placement_json(c.expert_gpus);
      p["record"] = "placement";
      p["replica"] = c.replica;
      p["step"] = c.step;
      if (c.moe_layer >= 0) p["layer"] = moe_layer_ids.at(static_cast<size_t>(c.moe_layer));
      os << p.dump() << "\n";
    }
    json j;
    j["record"] = "step";
    j["step"] = s.step;
    j["replica"] = s.replica;
    j["start_ns"] = s.start_ns;
    j["end_ns"] = s.end_ns;
    json seqs = json::array();
    for (const auto& q : s.seqs) {
      seqs.push_back({{"request", q.request},
                      {"gpu", q.gpu},
                      {"phase", q.prefill ? "prefill" : "decode"},
                      {"new_tokens", q.new_tokens},
                      {"context_tokens", q.context_tokens}});
    }
    j["sequences"] = seqs;
    json layers = json::array();
    for (const auto& l : s.layers) {
      layers.push_back({{"layer", l.layer},
                        {"routing", l.routing},
                        {"dispatch_bytes", std::llround(l.dispatch_bytes)},
                        {"combine_bytes", std::llround(l.combine_bytes)}});
    }
    j["layers"] = layers;
    j["sim"] = {{"step_ns", s.end_ns - s.start_ns}};
    os << j.dump() << "\n";
  }
}

}  // namespace moesim::sim::output

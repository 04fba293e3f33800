#include "sim/calibration/validation.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <set>
#include <tuple>

#include "base/check.h"
#include "sim/calibration/calibrate.h"

namespace moesim::sim {
namespace {

using Key = std::tuple<int64_t, int32_t, int32_t>;  // (step, gpu, layer)

struct Timeline {
  std::vector<double> start_s, end_s;
};

// Step starts keep the recorded idle gaps; each step lasts its own duration.
Timeline make_timeline(const std::vector<const TraceStep*>& steps,
                       const std::vector<double>& duration_s) {
  Timeline t;
  for (size_t i = 0; i < steps.size(); ++i) {
    double start = to_seconds(steps[i]->start_ns);
    if (i > 0) {
      double gap = std::max<double>(0.0, to_seconds(steps[i]->start_ns - steps[i - 1]->end_ns));
      start = t.end_s[i - 1] + gap;
    }
    t.start_s.push_back(start);
    t.end_s.push_back(start + duration_s[i]);
  }
  return t;
}

struct RequestTimes {
  std::vector<double> ttft_s, tpot_s;
  double output_tokens = 0;
  double span_s = 0;
};

RequestTimes request_times(const std::vector<const TraceStep*>& steps, const Timeline& t) {
  struct Req {
    double first_start = -1, prefill_end = -1, last_decode_end = -1;
    int64_t decodes = 0;
  };
  std::map<int32_t, Req> reqs;
  RequestTimes out;
  for (size_t i = 0; i < steps.size(); ++i) {
    for (const TraceSequence& q : steps[i]->sequences) {
      Req& r = reqs[q.request];
      if (r.first_start < 0) r.first_start = t.start_s[i];
      if (q.prefill) {
        r.prefill_end = t.end_s[i];
      } else {
        r.last_decode_end = t.end_s[i];
        ++r.decodes;
        out.output_tokens += 1;
      }
    }
  }
  for (const auto& [id, r] : reqs) {
    if (r.prefill_end < 0) continue;
    out.output_tokens += 1;  // the first token, emitted by the last prefill step
    out.ttft_s.push_back(r.prefill_end - r.first_start);
    if (r.decodes > 0 && r.last_decode_end > r.prefill_end) {
      out.tpot_s.push_back((r.last_decode_end - r.prefill_end) / static_cast<double>(r.decodes));
    }
  }
  if (!steps.empty()) out.span_s = t.end_s.back() - t.start_s.front();
  return out;
}

// Step duration with the step model's barriers from per-GPU, per-layer pre-dispatch compute
// (attention, dense FFN, router) and post-dispatch compute (experts); with the simple overlap,
// the step model's overlapped layer; with a micro-batch schedule, its timeline over the layers'
// stage costs, each scaled by its phase's phase_s / s.phase_s (ResimulatedStep::overlap).
// `lm_head_s` per GPU, after the last layer.
double compose_step_s(const ResimulatedStep& s,
                      const std::vector<std::vector<std::array<double, kNumPhases>>>& phase_s,
                      const std::vector<double>& lm_head_s, const std::vector<bool>& is_moe) {
  const size_t n = s.gpus.size();
  std::vector<double> clock(n, 0.0);
  const MicrobatchSchedule* schedule =
      s.overlap == OverlapMode::kTwoMicrobatch    ? &two_microbatch_schedule()
      : s.overlap == OverlapMode::kDecodePipeline ? &decode_pipeline_schedule()
                                                  : nullptr;
  std::vector<LayerStageCosts> region;
  auto flush = [&] {
    if (region.empty()) return;
    TimelineTotals totals{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0),
                          std::vector<double>(n, 0.0)};
    run_microbatch_timeline(*schedule, region, s.sm_sharing, clock, totals, nullptr);
    region.clear();
  };
  for (size_t l = 0; l < is_moe.size(); ++l) {
    if (schedule && is_moe[l]) {
      LayerStageCosts c = l < s.stage_costs.size() ? s.stage_costs[l] : LayerStageCosts{};
      if (c.num_gpus != static_cast<int32_t>(n))
        c.reset(static_cast<int32_t>(l), static_cast<int32_t>(n));
      for (size_t g = 0; g < n; ++g) {
        const auto gi = static_cast<int32_t>(g);
        auto scale = [&](Phase p, std::initializer_list<StageOp> ops, StageOp main) {
          const double sim = s.phase_s[g][l][static_cast<int>(p)];
          const double meas = phase_s[g][l][static_cast<int>(p)];
          if (sim > 0) {
            for (StageOp op : ops) {
              for (int32_t mb = 0; mb < 2; ++mb) c.compute(mb, op, gi) *= meas / sim;
            }
          } else {
            c.compute(0, main, gi) = meas;
          }
        };
        scale(Phase::kAttention, {StageOp::kAttentionPrep, StageOp::kAttention},
              StageOp::kAttention);
        scale(Phase::kRouter, {StageOp::kRouter}, StageOp::kRouter);
        scale(Phase::kExperts, {StageOp::kExperts, StageOp::kSharedExperts}, StageOp::kExperts);
      }
      region.push_back(std::move(c));
      continue;
    }
    flush();
    for (size_t g = 0; g < n; ++g) {
      const auto& p = phase_s[g][l];
      clock[g] += p[static_cast<int>(Phase::kAttention)] + p[static_cast<int>(Phase::kDenseFfn)] +
                  p[static_cast<int>(Phase::kRouter)];
    }
    if (!is_moe[l]) continue;
    if (s.overlap == OverlapMode::kSimple) {
      const double start = *std::min_element(clock.begin(), clock.end());
      double c = 0;
      for (size_t g = 0; g < n; ++g) {
        c = std::max(c, clock[g] - start + phase_s[g][l][static_cast<int>(Phase::kExperts)]);
      }
      const double d = s.dispatch_s[l];
      std::fill(clock.begin(), clock.end(), start + std::max(c, d) + std::min(c, d) / 2.0);
      continue;
    }
    double ready = *std::max_element(clock.begin(), clock.end()) + s.dispatch_s[l];
    for (size_t g = 0; g < n; ++g)
      clock[g] = ready + phase_s[g][l][static_cast<int>(Phase::kExperts)];
    double ready2 = *std::max_element(clock.begin(), clock.end()) + s.combine_s[l];
    std::fill(clock.begin(), clock.end(), ready2);
  }
  flush();
  for (size_t g = 0; g < n; ++g) clock[g] += lm_head_s[g];
  return *std::max_element(clock.begin(), clock.end());
}

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kAttention:
      return "attention";
    case Phase::kDenseFfn:
      return "dense_ffn";
    case Phase::kRouter:
      return "router";
    case Phase::kExperts:
      return "experts";
  }
  return "?";
}

bool phase_of_engine_op(const std::string& op, Phase* phase) {
  if (op == "rmsnorm" || op.rfind("attn_", 0) == 0) {
    *phase = Phase::kAttention;
  } else if (op == "dense_ffn") {
    *phase = Phase::kDenseFfn;
  } else if (op == "router" || op == "permute") {
    *phase = Phase::kRouter;
  } else if (op == "expert_ffn" || op == "shared_expert" || op == "combine" || op == "unpermute") {
    *phase = Phase::kExperts;
  } else {
    return false;
  }
  return true;
}

namespace {

// What the engine measured, indexed for the step comparisons.
struct MeasuredIndex {
  std::map<Key, std::array<double, kNumPhases>> phase;
  std::set<std::pair<int64_t, int32_t>> step_gpus;          // (step, gpu) with a phase measured
  std::map<std::pair<int64_t, int32_t>, double> lm_head_s;  // (step, gpu) -> seconds
};

// Per op kind: the profile's fit on the record's own work (r.ops, r.by_op and the op counters);
// returns the measurements indexed by (step, gpu, layer) and phase.
MeasuredIndex compare_ops(const ValidationInput& in, ValidationReport& r) {
  MeasuredIndex measured;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> per_op;
  for (const OpSample& s : in.measurements->ops) {
    if (!s.measured || s.step < 0) continue;
    const double measured_s = 1e-9 * static_cast<double>(s.measured_ns);
    Phase ph;
    if (s.op == "lm_head") {
      measured.lm_head_s[{s.step, s.sim_gpu}] += measured_s;
    } else if (phase_of_engine_op(s.op, &ph)) {
      measured.phase[{s.step, s.sim_gpu, s.layer_idx}][static_cast<int>(ph)] += measured_s;
      measured.step_gpus.insert({s.step, s.sim_gpu});
    }
    const OpFit* fit = in.profile->find(cost_kind_of_engine_op(s.op), s.dtype, fit_bytes_of(s));
    if (!fit) {
      ++r.num_ops_without_fit;
      continue;
    }
    OpComparison c;
    c.step = s.step;
    c.gpu = s.sim_gpu;
    c.layer_idx = s.layer_idx;
    c.op = s.op;
    c.dtype = s.dtype;
    c.tokens = s.tokens;
    c.flops = s.flops;
    c.bytes = s.bytes;
    c.measured_s = measured_s;
    c.simulated_s = fit->predict_s(s.flops, fit_bytes_of(s), static_cast<double>(s.tokens));
    c.in_range = fit->in_range(s.flops, fit_bytes_of(s), static_cast<double>(s.tokens));
    if (!c.in_range) ++r.num_ops_out_of_range;
    per_op[s.op].first.push_back(c.measured_s);
    per_op[s.op].second.push_back(c.simulated_s);
    r.ops.push_back(std::move(c));
  }
  for (const auto& [op, v] : per_op) r.by_op[op] = compute_error_stats(v.first, v.second);
  return measured;
}

// The composed step durations of the fully measured steps, per replica in step order.
struct ComposedSteps {
  bool all_gpus_measured = true;
  std::vector<double> measured_s, simulated_s;  // every replica's, in re-simulation order
  std::map<int32_t, std::vector<const TraceStep*>> trace_steps;  // replica -> steps
  std::map<int32_t, std::vector<double>> measured_by_replica_s, simulated_by_replica_s;
};

// Per phase, per (step, GPU) and per step: r.phases, r.steps, r.step_durations, their error
// statistics and the composition error. Returns the composed durations for the end-to-end
// comparison.
ComposedSteps compare_steps(const ValidationInput& in, const MeasuredIndex& measured_index,
                            ValidationReport& r) {
  const size_t num_layers = in.measured_layer_of_layer.size();
  MOESIM_CHECK(in.is_moe_layer.size() == num_layers, "validate: is_moe_layer size");
  ComposedSteps out;
  std::vector<double> step_meas, step_sim;
  std::array<std::pair<std::vector<double>, std::vector<double>>, kNumPhases> phase_v;
  std::map<std::pair<int32_t, int64_t>, const TraceStep*> trace_by_step;
  for (const TraceStep& t : in.trace->steps) trace_by_step[{t.replica, t.step}] = &t;
  for (const ResimulatedStep& s : in.steps) {
    MOESIM_CHECK(s.phase_s.size() == s.gpus.size(), "validate: phase table size");
    const std::vector<bool>& is_moe = in.is_moe_layer;
    std::vector<std::vector<std::array<double, kNumPhases>>> measured(
        s.gpus.size(), std::vector<std::array<double, kNumPhases>>(num_layers));
    bool complete = true;
    // The output head: measured where the replay ran it, else the simulation's on both sides.
    std::vector<double> lm_head_meas = s.lm_head_s;
    for (size_t g = 0; g < s.gpus.size(); ++g) {
      const int32_t gpu = s.gpus[g];
      if (!measured_index.step_gpus.count({s.step, gpu})) {
        complete = false;
        continue;
      }
      double meas_total = 0, sim_total = 0;
      auto lm = measured_index.lm_head_s.find({s.step, gpu});
      if (lm != measured_index.lm_head_s.end()) {
        lm_head_meas[g] = lm->second;
        meas_total += lm->second;
        sim_total += s.lm_head_s[g];
        ++r.num_lm_head_measured;
      }
      for (size_t l = 0; l < num_layers; ++l) {
        int32_t ml = in.measured_layer_of_layer[l];
        auto it =
            ml >= 0 ? measured_index.phase.find({s.step, gpu, ml}) : measured_index.phase.end();
        std::array<double, kNumPhases> mp{};
        if (it != measured_index.phase.end()) mp = it->second;
        measured[g][l] = mp;
        for (int p = 0; p < kNumPhases; ++p) {
          const double sp = s.phase_s[g][l][p];
          meas_total += mp[p];
          sim_total += sp;
          if (mp[p] > 0 || sp > 0) {
            r.phases.push_back(
                {s.step, gpu, static_cast<int32_t>(l), static_cast<Phase>(p), mp[p], sp});
            phase_v[p].first.push_back(mp[p]);
            phase_v[p].second.push_back(sp);
          }
        }
      }
      r.steps.push_back({s.step, s.replica, gpu, meas_total, sim_total});
      step_meas.push_back(meas_total);
      step_sim.push_back(sim_total);
    }
    double composed_sim = compose_step_s(s, s.phase_s, s.lm_head_s, is_moe);
    r.max_composition_error_s =
        std::max(r.max_composition_error_s, std::abs(composed_sim - s.duration_s));
    if (!complete) {
      out.all_gpus_measured = false;
      continue;
    }
    double composed_meas = compose_step_s(s, measured, lm_head_meas, is_moe);
    r.step_durations.push_back({static_cast<double>(s.step), composed_meas, composed_sim});
    out.measured_s.push_back(composed_meas);
    out.simulated_s.push_back(composed_sim);
    auto t = trace_by_step.find({s.replica, s.step});
    MOESIM_CHECK(t != trace_by_step.end(), "validate: re-simulated step not in the trace");
    out.trace_steps[s.replica].push_back(t->second);
    out.measured_by_replica_s[s.replica].push_back(composed_meas);
    out.simulated_by_replica_s[s.replica].push_back(composed_sim);
  }
  for (int p = 0; p < kNumPhases; ++p) {
    r.by_phase[p] = compute_error_stats(phase_v[p].first, phase_v[p].second);
  }
  r.per_step = compute_error_stats(step_meas, step_sim);
  r.step_duration = compute_error_stats(out.measured_s, out.simulated_s);
  return out;
}

// End to end (r.end_to_end): request latencies and throughput of the trace's requests on the
// composed step durations, simulated and measured.
void compare_end_to_end(ComposedSteps& composed, ValidationReport& r) {
  RequestTimes sim_t, meas_t;
  double sim_span = 0, meas_span = 0;
  for (const auto& [replica, steps] : composed.trace_steps) {
    RequestTimes a =
        request_times(steps, make_timeline(steps, composed.simulated_by_replica_s[replica]));
    RequestTimes b =
        request_times(steps, make_timeline(steps, composed.measured_by_replica_s[replica]));
    sim_t.ttft_s.insert(sim_t.ttft_s.end(), a.ttft_s.begin(), a.ttft_s.end());
    sim_t.tpot_s.insert(sim_t.tpot_s.end(), a.tpot_s.begin(), a.tpot_s.end());
    meas_t.ttft_s.insert(meas_t.ttft_s.end(), b.ttft_s.begin(), b.ttft_s.end());
    meas_t.tpot_s.insert(meas_t.tpot_s.end(), b.tpot_s.begin(), b.tpot_s.end());
    sim_t.output_tokens += a.output_tokens;
    meas_t.output_tokens += b.output_tokens;
    sim_span = std::max(sim_span, a.span_s);
    meas_span = std::max(meas_span, b.span_s);
  }
  auto add = [&](const char* name, double sim, double meas) {
    r.end_to_end.push_back({name, sim, meas});
  };
  const std::vector<double>& dur_sim = composed.simulated_s;
  const std::vector<double>& dur_meas = composed.measured_s;
  add("ttft_p50_ms", 1e3 * quantile(sim_t.ttft_s, 0.5), 1e3 * quantile(meas_t.ttft_s, 0.5));
  add("ttft_p99_ms", 1e3 * quantile(sim_t.ttft_s, 0.99), 1e3 * quantile(meas_t.ttft_s, 0.99));
  add("tpot_p50_ms", 1e3 * quantile(sim_t.tpot_s, 0.5), 1e3 * quantile(meas_t.tpot_s, 0.5));
  add("tpot_p99_ms", 1e3 * quantile(sim_t.tpot_s, 0.99), 1e3 * quantile(meas_t.tpot_s, 0.99));
  add("output_tokens_per_s", sim_span > 0 ? sim_t.output_tokens / sim_span : 0.0,
      meas_span > 0 ? meas_t.output_tokens / meas_span : 0.0);
  add("mean_step_ms", dur_sim.empty() ? 0.0 : 1e3 * r.step_duration.simulated_sum / dur_sim.size(),
      dur_meas.empty() ? 0.0 : 1e3 * r.step_duration.measured_sum / dur_meas.size());
}

}  // namespace

ValidationReport validate(const ValidationInput& in) {
  MOESIM_CHECK(in.measurements && in.profile && in.trace, "validate: null input");
  const MeasurementSet& m = *in.measurements;
  ValidationReport r;
  // File names only: reports are shipped beside profiles and must not name scratch paths.
  r.measurement_file = std::filesystem::path(m.file).filename().string();
  r.profile_name = in.profile->name;
  r.trace_file = std::filesystem::path(in.trace->file).filename().string();
  r.num_out_of_range_queries = in.num_out_of_range_queries;
  r.num_proxy_queries = in.num_proxy_queries;
  r.num_moe_layers_checked = in.num_moe_layers_checked;
  r.num_routing_mismatches = in.num_routing_mismatches;

  const MeasuredIndex measured = compare_ops(in, r);
  for (const ResimulatedStep& s : in.steps) {
    if (s.overlap == OverlapMode::kNone) continue;
    r.overlap_note = std::string("steps re-simulated and composed with the trace's overlap = \"") +
                     overlap_mode_name(s.overlap) +
                     "\"; the engine replayed every layer's ops in sequence, without overlap";
    break;
  }
  ComposedSteps composed = compare_steps(in, measured, r);
  if (!composed.all_gpus_measured) {
    r.end_to_end_note =
        "the engine did not play every GPU of the replica: end-to-end metrics need all of them";
    return r;
  }
  compare_end_to_end(composed, r);
  return r;
}

}  // namespace moesim::sim

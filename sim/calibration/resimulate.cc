#include "sim/calibration/resimulate.h"

#include <algorithm>
#include <array>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/check.h"
#include "sim/calibration/recorded_routing.h"
#include "sim/config/config_error.h"
#include "sim/cost/calibrated_cost_model.h"
#include "sim/cost/cost_spec.h"
#include "sim/placement/expert_placement.h"
#include "sim/placement/layer_placements.h"
#include "sim/serving/replica_builder.h"
#include "sim/serving/step_model.h"

namespace moesim::sim {
namespace {

// Collects one step's slices per (GPU, layer, phase), collectives per layer, lm_head per GPU,
// and the combine bytes of every MoE layer run.
class PhaseObserver final : public StepObserver {
 public:
  struct LayerBytes {
    int32_t layer_idx;
    double combine;
  };

  PhaseObserver(ResimulatedStep* out, size_t num_gpus, size_t num_layers) : out_(out) {
    out_->phase_s.assign(num_gpus, std::vector<std::array<double, kNumPhases>>(num_layers));
    out_->dispatch_s.assign(num_layers, 0.0);
    out_->combine_s.assign(num_layers, 0.0);
    out_->lm_head_s.assign(num_gpus, 0.0);
  }

  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime /*start_ns*/,
                SimTime duration_ns) override {
    const double s = to_seconds(duration_ns);
    std::string n = name;
    // A micro-batch timeline's stage ("<op>/mb<i>"): its phase, and its cost for the composition.
    if (const size_t slash = n.find("/mb"); slash != std::string::npos && layer_idx >= 0) {
      const int32_t mb = n[slash + 3] - '0';
      n.resize(slash);
      for (int32_t o = 0; o < kNumStageOps; ++o) {
        const auto op = static_cast<StageOp>(o);
        if (n != stage_op_name(op)) continue;
        auto& costs = out_->stage_costs;
        if (costs.size() <= static_cast<size_t>(layer_idx)) costs.resize(layer_idx + 1);
        LayerStageCosts& c = costs[layer_idx];
        if (c.num_gpus == 0) c.reset(layer_idx, static_cast<int32_t>(out_->phase_s.size()));
        if (is_comm_op(op)) {
          c.comm(mb, op) = std::max(c.comm(mb, op), s);
        } else {
          c.compute(mb, op, gpu_idx) += s;
          last_stage_s_ = &c.compute(mb, op, gpu_idx);
        }
      }
      if (n == "attention_prep") n = "attention";
      if (n == "shared_experts") n = "experts";
      if (n == "dispatch") {
        out_->dispatch_s[layer_idx] = std::max(out_->dispatch_s[layer_idx], s);
        return;
      }
      if (n == "combine") {
        out_->combine_s[layer_idx] = std::max(out_->combine_s[layer_idx], s);
        return;
      }
    }
    if (n == "lm_head") {
      out_->lm_head_s[gpu_idx] += s;
      return;
    }
    if (layer_idx < 0) return;
    auto& phases = out_->phase_s[gpu_idx][layer_idx];
    double* phase = nullptr;
    if (n == "attention") {
      phase = &phases[static_cast<int>(Phase::kAttention)];
    } else if (n == "dense_ffn") {
      phase = &phases[static_cast<int>(Phase::kDenseFfn)];
    } else if (n == "router") {
      phase = &phases[static_cast<int>(Phase::kRouter)];
    } else if (n == "experts") {
      phase = &phases[static_cast<int>(Phase::kExperts)];
    }
    if (phase) {
      *phase += s;
      last_phase_s_ = phase;
    } else if (n == "dispatch" || n == "dispatch+combine (overlapped)") {
      out_->dispatch_s[layer_idx] = std::max(out_->dispatch_s[layer_idx], s);
    } else if (n == "combine") {
      out_->combine_s[layer_idx] = std::max(out_->combine_s[layer_idx], s);
    }
  }

  // The stage costs and phases are full-rate work: the time a span lost to SM sharing comes off
  // them, and the composition applies the sharing again (compose_step_s).
  void on_sm_sharing(int32_t /*gpu_idx*/, int32_t /*layer_idx*/, SimTime lost_ns,
                     double /*sm_share*/) override {
    MOESIM_CHECK(last_stage_s_ && last_phase_s_, "on_sm_sharing follows a stage's slice");
    *last_stage_s_ -= to_seconds(lost_ns);
    *last_phase_s_ -= to_seconds(lost_ns);
  }

  void on_routing(int32_t layer_idx, int32_t /*moe_layer_idx*/, const CountMatrix& /*src_dst*/,
                  double /*dispatch_bytes*/, double combine_bytes) override {
    bytes_.push_back({layer_idx, combine_bytes});
  }

  // (layer, combine bytes) of the MoE layers run since construction.
  const std::vector<LayerBytes>& layer_bytes() const { return bytes_; }

 private:
  ResimulatedStep* out_;
  std::vector<LayerBytes> bytes_;
  // The stage cost and phase the last micro-batch compute slice added to (valid until the next
  // slice: on_sm_sharing() follows its slice at once).
  double* last_stage_s_ = nullptr;
  double* last_phase_s_ = nullptr;
};

// Model layer -> the measured layer standing for it: itself when measured, else the first
// measured layer (in layer order) of the same signature; -1 when none.
std::vector<int32_t> measured_layers(const ModelCard& card, const MeasurementSet& meas) {
  const size_t num_layers = card.layers.size();
  std::vector<int32_t> out(num_layers, -1);
  for (size_t l = 0; l < num_layers; ++l) {
    if (meas.layer_scales.count(static_cast<int32_t>(l))) {
      out[l] = static_cast<int32_t>(l);
      continue;
    }
    for (const auto& [ml, scale] : meas.layer_scales) {
      if (ml < static_cast<int32_t>(num_layers) && card.layers[ml] == card.layers[l]) {
        out[l] = ml;
        break;
      }
    }
  }
  return out;
}

// Everything one replica's re-simulation shares.
struct Context {
  const ReplicaBuilder& builder;
  const StepTraceFile& trace;
  const std::vector<int32_t>& moe_layer_of_layer;
  const MoeSpec* moe;  // the first MoE layer's; null for a dense model
  std::set<int64_t> measured_steps;
};

// The replica's placement from expert -> global GPU lists (the header's or a placement
// record's); ConfigError naming the trace for an expert without a GPU in the replica.
ExpertPlacement replica_placement(const Context& cx, const std::vector<int32_t>& gpus,
                                  const std::vector<std::vector<int32_t>>& expert_gpus) {
  const auto n = static_cast<int32_t>(gpus.size());
  std::vector<std::vector<int32_t>> local(expert_gpus.size());
  for (size_t e = 0; e < expert_gpus.size(); ++e) {
    for (int32_t g : expert_gpus[e]) {
      auto it = std::find(gpus.begin(), gpus.end(), g);
      if (it != gpus.end()) local[e].push_back(static_cast<int32_t>(it - gpus.begin()));
    }
  }
  return ExpertPlacement(static_cast<int32_t>(cx.moe->num_routed_experts), n,
                         std::min(n, cx.builder.topology().gpus_per_node()),
                         static_cast<int32_t>(cx.moe->num_shared_experts), local, cx.trace.file);
}

// Re-simulates the measured steps of replica `replica_idx` into `input`.
void resimulate_replica(const Context& cx, int32_t replica_idx, ValidationInput& input) {
  const Scenario& sc = cx.builder.scenario();
  const ModelCard& card = *sc.model;
  const DeploymentSpec& dep = sc.deployment;
  const std::string& trace_path = cx.trace.file;
  const std::vector<int32_t>& gpus = cx.trace.replica_gpus[replica_idx];
  const auto n = static_cast<int32_t>(gpus.size());
  if (n != dep.gpus_per_replica) {
    throw ConfigError(trace_path, 1, 0, "replicas.gpus",
                      "replica " + std::to_string(replica_idx) + " has " + std::to_string(n) +
                          " GPUs; the scenario deploys " + std::to_string(dep.gpus_per_replica));
  }
  std::unique_ptr<LayerPlacements> placement;
  std::unique_ptr<NetworkModel> network;
  std::unique_ptr<RoutingModel> routing;
  if (cx.moe) {
    placement =
        std::make_unique<LayerPlacements>(static_cast<int32_t>(num_moe_layers(card)),
                                          replica_placement(cx, gpus, cx.trace.expert_gpus));
    network = cx.builder.make_network();
    routing = std::make_unique<RecordedRoutingModel>(cx.trace, replica_idx, routing_shape_of(card),
                                                     cx.moe_layer_of_layer);
  }
  std::vector<GpuId> gpu_ids;
  for (int32_t g : gpus) gpu_ids.emplace_back(g);
  std::unique_ptr<StepModel> model = cx.builder.make_step_model(
      card, std::move(gpu_ids), placement.get(), network.get(), routing.get());

  // Placement records (replication, EPLB) apply from their step on; the reader checked that a
  // replica's records come in its step order.
  std::vector<const TracePlacementChange*> changes;
  for (const TracePlacementChange& c : cx.trace.placement_changes) {
    if (c.replica < 0 || c.replica == replica_idx) changes.push_back(&c);
  }
  const int32_t tp = dep.attention == AttentionParallel::kTensor ? dep.attention_tp : 1;
  size_t next_change = 0;
  for (const TraceStep& ts : cx.trace.steps) {
    if (ts.replica != replica_idx) continue;
    for (; next_change < changes.size() && changes[next_change]->step <= ts.step; ++next_change) {
      // The step model reads each MoE layer's placement.
      const TracePlacementChange& c = *changes[next_change];
      if (!placement) continue;
      const ExpertPlacement p = replica_placement(cx, gpus, c.expert_gpus);
      if (c.layer < 0) {
        placement->set_all(p);
        continue;
      }
      if (c.layer >= static_cast<int32_t>(cx.moe_layer_of_layer.size()) ||
          cx.moe_layer_of_layer[c.layer] < 0) {
        throw ConfigError(
            trace_path, 0, 0, "placement.layer",
            "layer " + std::to_string(c.layer) + " is not a MoE layer of " + card.name);
      }
      placement->set_layer(cx.moe_layer_of_layer[c.layer], p);
    }
    if (!cx.measured_steps.count(ts.step)) continue;
    std::vector<std::vector<SeqSlice>> ranks(static_cast<size_t>(n / tp));
    for (const TraceSequence& q : ts.sequences) {
      auto it = std::find(gpus.begin(), gpus.end(), q.gpu);
      if (it == gpus.end() || (it - gpus.begin()) % tp != 0) {
        throw ConfigError(trace_path, 0, 0, "step " + std::to_string(ts.step) + ".sequences",
                          "GPU " + std::to_string(q.gpu) + " is not an attention rank");
      }
      ranks[static_cast<size_t>((it - gpus.begin()) / tp)].push_back(
          SeqSlice{q.new_tokens, q.context_tokens, q.prefill});
    }
    ResimulatedStep rs;
    rs.step = ts.step;
    rs.replica = replica_idx;
    rs.gpus = gpus;
    rs.overlap = dep.overlap;
    rs.sm_sharing = {cx.builder.topology().gpu_spec().num_sms, dep.comm_sms};
    PhaseObserver obs(&rs, gpus.size(), card.layers.size());
    rs.duration_s = to_seconds(model->run(ts.step, ranks, &obs).duration_ns);
    // The re-simulated combine moves the recorded bytes when routing and placement match (the
    // recorded dispatch bytes also carry the weight copies of placement policies).
    for (const PhaseObserver::LayerBytes& b : obs.layer_bytes()) {
      auto it = std::find_if(ts.layers.begin(), ts.layers.end(),
                             [&](const TraceLayer& l) { return l.layer_idx == b.layer_idx; });
      ++input.num_moe_layers_checked;
      if (it == ts.layers.end() || it->combine_bytes != b.combine) ++input.num_routing_mismatches;
    }
    input.steps.push_back(std::move(rs));
  }
}

}  // namespace

Scenario calibrated_scenario(const Scenario& scenario, const CalibrationProfile& profile) {
  Scenario calibrated = scenario;
  calibrated.cost = CostSpec{};
  calibrated.cost.kind = CostModelKind::kCalibrated;
  calibrated.cost.profile = std::make_shared<const CalibrationProfile>(profile);
  calibrated.cost.roofline = scenario.cost.roofline;
  return calibrated;
}

ValidationInput resimulate_recorded_steps(const Scenario& scenario,
                                          const CalibrationProfile& profile,
                                          const MeasurementSet& measurements,
                                          const StepTraceFile& trace) {
  const ModelCard& card = *scenario.model;
  if (!trace.model.empty() && trace.model != card.name) {
    throw ConfigError(
        trace.file, 1, 0, "model.name",
        "trace model '" + trace.model + "' differs from the scenario's '" + card.name + "'");
  }
  Scenario calibrated = calibrated_scenario(scenario, profile);
  // The schedule the trace's steps were timed with (the reader checked the name); traces from
  // before the key: the scenario's.
  if (!trace.overlap.empty()) parse_overlap_mode(trace.overlap, &calibrated.deployment.overlap);
  // Likewise the SMs its collectives held.
  if (trace.comm_sms >= 0) {
    const GpuSpec& gpu = scenario.topology->gpu_spec();
    if (trace.comm_sms > 0 && trace.comm_sms >= gpu.num_sms) {
      throw ConfigError(trace.file, 1, 0, "comm_sms",
                        std::to_string(trace.comm_sms) +
                            " SMs held by the collectives leave none " + "of the scenario GPU '" +
                            gpu.name + "' (" + std::to_string(gpu.num_sms) + " SMs)");
    }
    calibrated.deployment.comm_sms = trace.comm_sms;
  }
  const ReplicaBuilder builder(calibrated);

  std::vector<int32_t> moe_layer_of_layer(card.layers.size(), -1);
  int32_t num_moe = 0;
  const MoeSpec* moe = nullptr;
  for (size_t l = 0; l < card.layers.size(); ++l) {
    if (!card.layers[l].ffn.is_moe) continue;
    moe_layer_of_layer[l] = num_moe++;
    if (!moe) moe = &card.layers[l].ffn.moe;
  }

  ValidationInput input;
  input.measurements = &measurements;
  input.profile = &profile;
  input.trace = &trace;
  input.measured_layer_of_layer = measured_layers(card, measurements);
  for (int32_t m : moe_layer_of_layer) input.is_moe_layer.push_back(m >= 0);

  Context cx{builder, trace, moe_layer_of_layer, moe, {}};
  for (const StepSample& s : measurements.steps) cx.measured_steps.insert(s.step);
  for (int32_t ri = 0; ri < static_cast<int32_t>(trace.replica_gpus.size()); ++ri) {
    resimulate_replica(cx, ri, input);
  }

  const auto* calibrated_cost = dynamic_cast<const CalibratedCostModel*>(&builder.cost());
  input.num_out_of_range_queries = builder.cost().num_out_of_range_queries();
  input.num_proxy_queries = calibrated_cost ? calibrated_cost->num_proxy_queries() : 0;
  return input;
}

}  // namespace moesim::sim

#include "sim/study/layer_study.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "sim/config/config_error.h"
#include "sim/serving/replica_builder.h"

namespace moesim::sim::study {
namespace {

// The all-to-all spans of every timeline: "dispatch", "combine",
// "dispatch+combine (overlapped)" and the micro-batches' "dispatch/mb0" ... "combine/mb1".
bool is_comm_span(const char* name) {
  return std::strncmp(name, "dispatch", 8) == 0 || std::strncmp(name, "combine", 7) == 0;
}
// Routed and shared experts: "experts", "experts/mb0", "shared_experts/mb1", ...
bool is_expert_span(const char* name) {
  return std::strncmp(name, "experts", 7) == 0 || std::strncmp(name, "shared_experts", 14) == 0;
}

// Collects the step model's spans per layer: where each layer starts, each GPU's compute in it,
// the all-to-all time (GPU 0's, the collectives span every GPU alike), barrier waits, experts.
class LayerSpans final : public StepObserver {
 public:
  LayerSpans(int32_t num_layers, int32_t num_gpus)
      : num_gpus_(num_gpus),
        num_layers_(num_layers),
        layer_start_ns_(static_cast<size_t>(num_layers) + 1, kNone),
        compute_ns_(static_cast<size_t>(num_layers) * num_gpus, 0),
        comm_ns_(static_cast<size_t>(num_layers), 0),
        wait_ns_(static_cast<size_t>(num_layers), 0),
        experts_ns_(static_cast<size_t>(num_layers) * num_gpus, 0),
        sm_lost_ns_(static_cast<size_t>(num_layers), 0) {}

  // Keeps GPU 0's spans of layer `layer_idx` (-1: none).
  void keep_spans_of(int32_t layer_idx) { kept_layer_ = layer_idx; }
  const std::vector<LayerStudySpan>& kept() const { return kept_; }
  SimTime layer_start_ns(int32_t layer_idx) const { return layer_start_ns_[layer_idx]; }

  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, SimTime start_ns,
                SimTime duration_ns) override {
    // Speculative draft passes run after the output head, traced one past the model's layers:
    // they count in the step's duration, not in any layer's.
    if (layer_idx >= num_layers_) return;
    if (gpu_idx == 0 && layer_idx == kept_layer_ && layer_idx >= 0) {
      kept_.push_back({name, static_cast<double>(start_ns), static_cast<double>(duration_ns)});
    }
    // The output head (layer -1) is kept as the boundary after the last layer.
    const size_t slot = layer_idx < 0 ? layer_start_ns_.size() - 1 : static_cast<size_t>(layer_idx);
    layer_start_ns_[slot] = std::min(layer_start_ns_[slot], start_ns);
    if (layer_idx < 0) return;
    const size_t at = static_cast<size_t>(layer_idx) * num_gpus_ + gpu_idx;
    if (std::strcmp(name, "wait") == 0) {
      wait_ns_[layer_idx] += duration_ns;
    } else if (is_comm_span(name)) {
      if (gpu_idx == 0) comm_ns_[layer_idx] += duration_ns;
    } else {
      compute_ns_[at] += duration_ns;
      if (is_expert_span(name)) experts_ns_[at] += duration_ns;
    }
  }

  void on_sm_sharing(int32_t gpu_idx, int32_t layer_idx, SimTime lost_ns,
                     double /*sm_share*/) override {
    if (layer_idx < 0 || layer_idx >= num_layers_) return;
    sm_lost_ns_[layer_idx] += lost_ns;
    if (gpu_idx == 0 && layer_idx == kept_layer_)
      kept_.back().sm_lost_us = static_cast<double>(lost_ns);
  }

  // Wall time of layer `layer_idx`: to the start of the next layer that reported a span (or the
  // output head, or `step_ns`).
  SimTime layer_ns(int32_t layer_idx, SimTime step_ns) const {
    SimTime end =
        step_ns;  // (draft passes follow the output head, whose start ends the last layer)
    for (size_t j = static_cast<size_t>(layer_idx) + 1; j < layer_start_ns_.size(); ++j) {
      if (layer_start_ns_[j] != kNone) {
        end = layer_start_ns_[j];
        break;
      }
    }
    return end - layer_start_ns_[layer_idx];
  }
  SimTime compute_ns(int32_t layer_idx, int32_t g) const {
    return compute_ns_[static_cast<size_t>(layer_idx) * num_gpus_ + g];
  }
  SimTime experts_ns(int32_t layer_idx, int32_t g) const {
    return experts_ns_[static_cast<size_t>(layer_idx) * num_gpus_ + g];
  }
  SimTime comm_ns(int32_t layer_idx) const { return comm_ns_[layer_idx]; }
  SimTime wait_ns(int32_t layer_idx) const { return wait_ns_[layer_idx]; }
  SimTime sm_lost_ns(int32_t layer_idx) const { return sm_lost_ns_[layer_idx]; }

 private:
  static constexpr SimTime kNone = std::numeric_limits<SimTime>::max();
  size_t num_gpus_;
  int32_t num_layers_;
  int32_t kept_layer_ = -1;
  std::vector<LayerStudySpan>
      kept_;  // start / duration / lost in ns until run_layer_study converts
  std::vector<SimTime> layer_start_ns_;  // per layer, then the output head; kNone: no span
  std::vector<SimTime> compute_ns_;      // per layer x GPU
  std::vector<SimTime> comm_ns_;         // per layer (GPU 0)
  std::vector<SimTime> wait_ns_;         // per layer, summed over GPUs
  std::vector<SimTime> experts_ns_;      // per layer x GPU
  std::vector<SimTime> sm_lost_ns_;      // per layer, summed over GPUs
};

}  // namespace

std::vector<LayerStudyRow> run_layer_study(const Scenario& sc,
                                           const std::vector<int64_t>& seqs_per_gpu,
                                           const LayerStudyOptions& options) {
  const int64_t context_tokens = options.context_tokens;
  const uint64_t seed = options.seed;
  const ModelCard& card = *sc.model;
  const int64_t num_moe = num_moe_layers(card);
  if (num_moe == 0) throw ConfigError(sc.source_file, 0, 0, "model", "the model has no MoE layer");
  const DeploymentSpec& d = sc.deployment;
  const ReplicaBuilder builder(sc);
  // The deployment's placement, profiled (EPLB) from the scenario's routing like replica 0's.
  const std::unique_ptr<LayerPlacements> placement =
      builder.static_placements(builder.make_routing(sc.routing, seed).get());
  const std::unique_ptr<NetworkModel> network = builder.make_network();
  const int32_t num_gpus = d.gpus_per_replica;
  const auto num_layers = static_cast<int32_t>(card.layers.size());
  const double us_per_layer = 1e3 * static_cast<double>(num_moe);  // ns sum -> us per MoE layer
  std::vector<LayerStudyRow> rows;
  for (bool skewed : {true, false}) {
    const RoutingSpec spec = skewed ? sc.routing : routing_preset("uniform");
    for (int64_t n : seqs_per_gpu) {
      // Speculative decoding ([speculative]): every decode sequence verifies 1 + k tokens and
      // the step runs its k draft passes, as a step of the cluster does while no sequence is
      // near its output length.
      const int32_t k = options.prefill_tokens == 0 && sc.speculative.enabled
                            ? sc.speculative.num_draft_tokens
                            : 0;
      StepModelUse use;
      use.speculative = k > 0;
      const std::unique_ptr<RoutingModel> routing = builder.make_routing(spec, seed);
      const std::unique_ptr<StepModel> model =
          builder.make_step_model(card, builder.replica_gpus(0), placement.get(), network.get(),
                                  routing.get(), builder.step_model_options(card, use));
      const int32_t tp = num_gpus / model->num_ranks();
      std::vector<std::vector<SeqSlice>> ranks(static_cast<size_t>(model->num_ranks()));
      const SeqSlice seq = options.prefill_tokens > 0
                               ? SeqSlice{options.prefill_tokens, context_tokens, true}
                               : SeqSlice{1 + k, context_tokens, false};
      for (auto& r : ranks) r.assign(static_cast<size_t>(n * tp), seq);
      LayerSpans spans(num_layers, num_gpus);
      // The middle MoE layer of the first batch size's skewed step.
      int32_t kept_layer = -1;
      if (options.timeline && skewed && n == seqs_per_gpu.front()) {
        int64_t seen = 0;
        for (int32_t li = 0; li < num_layers && kept_layer < 0; ++li) {
          if (card.layers[li].ffn.is_moe && seen++ == num_moe / 2) kept_layer = li;
        }
        spans.keep_spans_of(kept_layer);
      }
      const StepResult& res = model->run(0, ranks, &spans);
      if (kept_layer >= 0) {
        const auto origin = static_cast<double>(spans.layer_start_ns(kept_layer));
        options.timeline->clear();
        for (LayerStudySpan sp : spans.kept()) {
          sp.start_us = (sp.start_us - origin) / 1e3;
          sp.duration_us /= 1e3;
          sp.sm_lost_us /= 1e3;
          options.timeline->push_back(sp);
        }
        std::stable_sort(options.timeline->begin(), options.timeline->end(),
                         [](const LayerStudySpan& a, const LayerStudySpan& b) {
                           return a.start_us < b.start_us;
                         });
      }
      double layer = 0, comm = 0, compute_max = 0, expert_max = 0, expert_sum = 0, wait = 0,
             sm_lost = 0;
      for (int32_t li = 0; li < num_layers; ++li) {
        if (!card.layers[li].ffn.is_moe) continue;
        layer += static_cast<double>(spans.layer_ns(li, res.duration_ns));
        comm += static_cast<double>(spans.comm_ns(li));
        wait += static_cast<double>(spans.wait_ns(li));
        sm_lost += static_cast<double>(spans.sm_lost_ns(li));
        SimTime c_max = 0, e_max = 0;
        for (int32_t g = 0; g < num_gpus; ++g) {
          c_max = std::max(c_max, spans.compute_ns(li, g));
          e_max = std::max(e_max, spans.experts_ns(li, g));
          expert_sum += static_cast<double>(spans.experts_ns(li, g));
        }
        compute_max += static_cast<double>(c_max);
        expert_max += static_cast<double>(e_max);
      }
      LayerStudyRow row;
      row.seqs_per_gpu = n;
      row.skewed = skewed;
      row.comm_us = comm / us_per_layer;
      row.layer_us = layer / us_per_layer;
      row.compute_max_us = compute_max / us_per_layer;
      row.exposed_comm_us = row.layer_us - row.compute_max_us;
      row.expert_max_us = expert_max / us_per_layer;
      row.expert_mean_us = expert_sum / static_cast<double>(num_gpus) / us_per_layer;
      row.wait_mean_us = wait / static_cast<double>(num_gpus) / us_per_layer;
      row.sm_lost_mean_us = sm_lost / static_cast<double>(num_gpus) / us_per_layer;
      row.step_ms = to_ms(res.duration_ns);
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace moesim::sim::study

#include "sim/study/pruning_study.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>

#include "base/check.h"
#include "sim/config/config_error.h"
#include "sim/core/time.h"
#include "sim/placement/expert_placement.h"
#include "sim/placement/layer_placements.h"
#include "sim/policy/activation_profile.h"
#include "sim/policy/expert_pruning_deployment.h"
#include "sim/policy/pruned_routing.h"
#include "sim/routing/synthetic_routing.h"
#include "sim/serving/replica_builder.h"

namespace moesim::sim::study {

PruningStudy run_pruning_study(const Scenario& sc, const PruningStudyOptions& opt) {
  const ModelCard& card = *sc.model;
  const DeploymentSpec& dep = sc.deployment;
  if (num_moe_layers(card) == 0) {
    throw ConfigError(sc.source_file, 0, 0, "model", card.name + " has no MoE layer to prune");
  }
  const RoutingShape shape = routing_shape_of(card);
  const MoeSpec* moe = nullptr;
  for (const LayerSpec& l : card.layers) {
    if (l.ffn.is_moe && !moe) moe = &l.ffn.moe;
  }
  for (double f : opt.fractions) {
    if (!(f >= 0.0 && f < 1.0) ||
        shape.num_experts - PruningPlan::num_pruned_for(f, shape.num_experts) < shape.top_k) {
      throw ConfigError("moesim prune", 0, 0, "fractions",
                        "fraction " + std::to_string(f) + " must be in [0, 1) and keep at least " +
                            std::to_string(shape.top_k) + " of the " +
                            std::to_string(shape.num_experts) + " experts (top_k)");
    }
  }
  MOESIM_CHECK(opt.batch_per_gpu >= 1 && opt.context_tokens >= 1 && opt.num_timed_steps >= 1,
               "study options in range");
  PruningStudy study;
  study.scenario_name = sc.name;
  study.model_name = card.name;
  study.num_gpus = dep.gpus_per_replica;
  study.num_experts = shape.num_experts;
  study.num_moe_layers = shape.num_moe_layers;
  study.options = opt;
  study.options.progress = nullptr;  // not kept past the call
  const int32_t num_steps = opt.profile.profile_steps;
  study.profiled_tokens_per_layer = static_cast<int64_t>(num_steps) * opt.profile.tokens_per_step;

  // Profile steps [0, P); measure re-routing on held-out steps [P, 2P).
  const uint64_t routing_seed = ReplicaBuilder::routing_seed(sc.run.seed, 0);
  SyntheticRoutingModel sampler(shape, sc.routing, routing_seed);
  const ActivationProfile profile =
      profile_activations(sampler, 0, num_steps, opt.profile.tokens_per_step, {});
  const int64_t num_stages = 2 + static_cast<int64_t>(opt.fractions.size());
  int64_t stages_done = 0;
  auto stage_done = [&] {
    if (opt.progress) opt.progress(++stages_done, num_stages);
  };
  stage_done();
  for (int32_t l = 0; l < shape.num_moe_layers; ++l) {
    study.num_dead_experts +=
        static_cast<int32_t>(dead_experts(profile, l, opt.profile.dead_threshold).size());
  }
  std::vector<PruningPlan> plans;
  for (double f : opt.fractions) {
    plans.push_back(PruningPlan::least_activated(profile, f, shape.top_k));
  }
  const std::vector<std::vector<RerouteStats>> held_out = held_out_reroute_per_layer(
      sampler, plans, num_steps, num_steps, opt.profile.tokens_per_step, routing_seed);
  stage_done();

  // Memory and decode step time per fraction, for replica 0 as the cluster would build it.
  // One network model for every fraction (a collective's result depends only on its traffic),
  // as a replica keeps one for all its steps (and SimGrid aborts on a second one in a process).
  const ReplicaBuilder builder(sc);
  const std::unique_ptr<NetworkModel> network = builder.make_network();
  const int32_t num_gpus = dep.gpus_per_replica;
  const int32_t gpus_per_node = std::min(num_gpus, builder.topology().gpus_per_node());
  const int32_t tp = dep.attention == AttentionParallel::kTensor ? dep.attention_tp : 1;
  const std::vector<std::vector<SeqSlice>> ranks(
      num_gpus / tp,
      std::vector<SeqSlice>(opt.batch_per_gpu, SeqSlice{1, opt.context_tokens, false}));
  for (size_t f = 0; f < plans.size(); ++f) {
    const PruningPlan& plan = plans[f];
    const int32_t kept = plan.num_kept_per_layer();
    const ModelCard pcard = pruned_model_card(card, kept);
    const ExpertPlacement placement = repacked_placement(
        kept, num_gpus, gpus_per_node, static_cast<int32_t>(moe->num_shared_experts));
    const LayerPlacements placements(shape.num_moe_layers, placement);
    const GpuMemoryLayout layout = builder.memory_layout(
        pcard, &placements, "deployment",
        card.name + " pruned to " + std::to_string(kept) + " experts per layer");
    SyntheticRoutingModel inner(shape, sc.routing, routing_seed);
    PrunedRoutingModel routing(inner, plan);
    const std::unique_ptr<StepModel> step = builder.make_step_model(
        pcard, builder.replica_gpus(0), &placements, network.get(), &routing);
    double step_s = 0.0;
    for (int32_t i = 0; i < opt.num_timed_steps; ++i) {
      step_s += to_seconds(step->run(i, ranks, nullptr).duration_ns);
    }
    RerouteStats total;
    double max_layer_loss = 0.0;
    for (const RerouteStats& layer : held_out[f]) {
      total.add(layer);
      max_layer_loss = std::max(max_layer_loss, layer.mass_lost());
    }
    PruningStudyRow row;
    row.fraction = opt.fractions[f];
    row.experts_kept_per_layer = kept;
    row.expert_slots_per_gpu = placement.max_slots_per_gpu();
    row.weight_bytes_per_gpu = layout.weight_bytes();
    row.kv_pool_bytes_per_gpu = layout.kv_pool_bytes;
    const int64_t blocks_per_seq =
        blocks_for_sequence(layout, opt.context_tokens, sc.scheduler.kv_block_tokens);
    row.max_decode_batch_per_gpu = layout.num_kv_blocks / std::max<int64_t>(1, blocks_per_seq);
    row.decode_step_s = step_s / opt.num_timed_steps;
    row.routing_mass_lost = total.mass_lost();
    row.max_layer_mass_lost = max_layer_loss;
    row.tokens_rerouted = total.tokens_affected_fraction();
    study.rows.push_back(row);
    stage_done();
  }
  study.plans = std::move(plans);
  return study;
}

std::string format_pruning_study_text(const PruningStudy& s) {
  const PruningStudyOptions& o = s.options;
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "expert pruning: %s (%s), EP%d, %d experts x %d MoE layers\n"
                "profile: %lld tokens per layer (%d steps), %d dead experts (rate < %g) over all "
                "layers; mass lost on the next %d steps\n"
                "decode step: %lld sequences per attention rank at %lld tokens of context, mean "
                "of %d steps\n\n",
                s.scenario_name.c_str(), s.model_name.c_str(), s.num_gpus, s.num_experts,
                s.num_moe_layers, static_cast<long long>(s.profiled_tokens_per_layer),
                o.profile.profile_steps, s.num_dead_experts, o.profile.dead_threshold,
                o.profile.profile_steps, static_cast<long long>(o.batch_per_gpu),
                static_cast<long long>(o.context_tokens), o.num_timed_steps);
  out += buf;
  std::snprintf(buf, sizeof buf, "%6s %6s %9s %12s %12s %10s %11s %10s %10s %10s\n", "pruned",
                "kept", "slots/GPU", "weights/GPU", "KV pool/GPU", "max batch", "decode step",
                "mass lost", "max layer", "rerouted");
  out += buf;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  for (const PruningStudyRow& r : s.rows) {
    std::snprintf(buf, sizeof buf,
                  "%5.0f%% %6d %9d %8.1f GiB %8.1f GiB %10lld %8.2f ms %9.2f%% %9.2f%% %9.2f%%\n",
                  100.0 * r.fraction, r.experts_kept_per_layer, r.expert_slots_per_gpu,
                  r.weight_bytes_per_gpu / gib, r.kv_pool_bytes_per_gpu / gib,
                  static_cast<long long>(r.max_decode_batch_per_gpu), 1e3 * r.decode_step_s,
                  100.0 * r.routing_mass_lost, 100.0 * r.max_layer_mass_lost,
                  100.0 * r.tokens_rerouted);
    out += buf;
  }
  return out;
}

std::string format_pruning_study_json(const PruningStudy& s) {
  nlohmann::ordered_json j;
  j["scenario"] = s.scenario_name;
  j["model"] = s.model_name;
  j["num_gpus"] = s.num_gpus;
  j["num_experts"] = s.num_experts;
  j["num_moe_layers"] = s.num_moe_layers;
  j["profiled_tokens_per_layer"] = s.profiled_tokens_per_layer;
  j["num_dead_experts"] = s.num_dead_experts;
  j["dead_threshold"] = s.options.profile.dead_threshold;
  j["batch_per_gpu"] = s.options.batch_per_gpu;
  j["context_tokens"] = s.options.context_tokens;
  j["num_timed_steps"] = s.options.num_timed_steps;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const PruningStudyRow& r : s.rows) {
    nlohmann::ordered_json x;
    x["fraction"] = r.fraction;
    x["experts_kept_per_layer"] = r.experts_kept_per_layer;
    x["expert_slots_per_gpu"] = r.expert_slots_per_gpu;
    x["weight_bytes_per_gpu"] = r.weight_bytes_per_gpu;
    x["kv_pool_bytes_per_gpu"] = r.kv_pool_bytes_per_gpu;
    x["max_decode_batch_per_gpu"] = r.max_decode_batch_per_gpu;
    x["decode_step_s"] = r.decode_step_s;
    x["routing_mass_lost"] = r.routing_mass_lost;
    x["max_layer_mass_lost"] = r.max_layer_mass_lost;
    x["tokens_rerouted"] = r.tokens_rerouted;
    rows.push_back(x);
  }
  j["rows"] = rows;
  return j.dump(2) + "\n";
}

}  // namespace moesim::sim::study

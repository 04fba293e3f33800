// `moesim validate SCENARIO --profile PROFILE.toml --measurements MEAS.jsonl`: re-simulates the
// steps an engine replay measured, with the calibrated cost model and the recorded routing, and
// reports simulated against measured time per op kind, per phase, per step and end to end
// (sim/calibration/validation.h; docs/calibration.md).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>

#include "apps/moesim/cli.h"
#include "sim/calibration/calibrated_cost_model.h"
#include "sim/calibration/cost_model_factory.h"
#include "sim/calibration/measurement_reader.h"
#include "sim/calibration/profile.h"
#include "sim/calibration/recorded_routing.h"
#include "sim/calibration/step_trace_reader.h"
#include "sim/calibration/validation.h"
#include "sim/config/config_error.h"
#include "sim/network/network_model.h"
#include "sim/placement/expert_placement.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/step_model.h"
#ifdef MOESIM_HAVE_SIMGRID
#include "sim/network/simgrid/simgrid_model.h"
#endif

namespace moesim::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: moesim validate SCENARIO --profile PROFILE.toml --measurements MEAS.jsonl\n"
    "                       [--trace STEPS.jsonl] [--out DIR] [--json]\n\n"
    "Re-simulates the steps MEAS.jsonl measured (the step trace it names, or --trace) with the\n"
    "calibrated cost model and the recorded routing, and prints simulated vs measured error per\n"
    "op kind, per phase, per step and end to end (TTFT, TPOT, throughput).\n"
    "  --out DIR   also write report.json, report.md, ops.csv, phases.csv, steps.csv\n"
    "  --json      print report.json instead of the table\n"
    "exit codes: 0 success, 2 bad input\n";

// Collects one step's slices per (GPU, layer, phase), collectives per layer, lm_head per GPU.
class PhaseObserver final : public sim::StepObserver {
 public:
  PhaseObserver(sim::ResimulatedStep* out, size_t num_gpus, size_t num_layers) : out_(out) {
    out_->phase_s.assign(num_gpus, std::vector<std::array<double, sim::kNumPhases>>(num_layers));
    out_->dispatch_s.assign(num_layers, 0.0);
    out_->combine_s.assign(num_layers, 0.0);
    out_->lm_head_s.assign(num_gpus, 0.0);
  }
  void on_slice(int32_t gpu_idx, const char* name, int32_t layer_idx, sim::SimTime start_ns,
                sim::SimTime duration_ns) override {
    const double s = sim::to_seconds(duration_ns);
    const std::string n = name;
    if (n == "lm_head") {
      out_->lm_head_s[gpu_idx] += s;
      return;
    }
    if (layer_idx < 0) return;
    auto& phases = out_->phase_s[gpu_idx][layer_idx];
    if (n == "attention") {
      phases[static_cast<int>(sim::Phase::kAttention)] += s;
    } else if (n == "dense_ffn") {
      phases[static_cast<int>(sim::Phase::kDenseFfn)] += s;
    } else if (n == "router") {
      phases[static_cast<int>(sim::Phase::kRouter)] += s;
    } else if (n == "experts") {
      phases[static_cast<int>(sim::Phase::kExperts)] += s;
    } else if (n == "dispatch") {
      out_->dispatch_s[layer_idx] = std::max(out_->dispatch_s[layer_idx], s);
    } else if (n == "combine") {
      out_->combine_s[layer_idx] = std::max(out_->combine_s[layer_idx], s);
    } else if (n == "dispatch+combine (overlapped)") {
      out_->dispatch_s[layer_idx] = std::max(out_->dispatch_s[layer_idx], s);
    }
  }
  void on_routing(int32_t layer_idx, int32_t /*moe_layer_idx*/, const sim::CountMatrix& /*src_dst*/,
                  double /*dispatch_bytes*/, double combine_bytes) override {
    bytes_.push_back({layer_idx, combine_bytes});
  }
  // (layer, combine bytes) of the MoE layers run since construction.
  struct LayerBytes {
    int32_t layer_idx;
    double combine;
  };
  const std::vector<LayerBytes>& layer_bytes() const { return bytes_; }

 private:
  sim::ResimulatedStep* out_;
  std::vector<LayerBytes> bytes_;
};

std::string resolve_trace(const std::string& recorded, const std::string& meas_file) {
  if (recorded.empty()) return recorded;
  if (fs::exists(recorded)) return recorded;
  fs::path beside = fs::path(meas_file).parent_path() / fs::path(recorded).filename();
  return fs::exists(beside) ? beside.string() : recorded;
}

void write_file(const fs::path& p, const std::function<void(std::ostream&)>& fn) {
  std::ofstream f(p);
  if (!f) throw UsageError{"cannot write " + p.string()};
  fn(f);
}

}  // namespace

int validate_command(const std::vector<std::string>& argv) {
  Args args(argv, {"--profile", "--measurements", "--trace", "--out"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& scenario_path = args.positional(0, "SCENARIO");
  auto profile_path = args.value("--profile");
  auto meas_path = args.value("--measurements");
  auto trace_opt = args.value("--trace");
  auto out_dir = args.value("--out");
  bool json = args.flag("--json");
  args.finish(1);
  if (!profile_path) throw UsageError{"missing --profile PROFILE.toml"};
  if (!meas_path) throw UsageError{"missing --measurements MEAS.jsonl"};

  sim::Scenario sc = sim::load_scenario(scenario_path);
  sim::CalibrationProfile profile = sim::load_profile(*profile_path);
  sim::MeasurementSet meas = sim::read_measurements(*meas_path);
  if (meas.mode != "replay") {
    throw sim::ConfigError(*meas_path, 1, 0, "mode", "validation needs replay measurements");
  }
  std::string trace_path = trace_opt ? *trace_opt : resolve_trace(meas.trace_file, *meas_path);
  if (trace_path.empty()) throw UsageError{"the measurements name no trace_file: give --trace"};
  sim::StepTraceFile trace = sim::read_step_trace(trace_path);
  const sim::ModelCard& card = *sc.model;
  // The profile's [network] calibration, when it has one, applies to the re-simulation.
  const std::shared_ptr<const sim::Topology> net_topology =
      sim::make_network_topology(profile, sc.topology);
  const sim::Topology& topo = *net_topology;
  const sim::DeploymentSpec& dep = sc.deployment;
  if (!trace.model.empty() && trace.model != card.name) {
    throw sim::ConfigError(
        trace_path, 1, 0, "model.name",
        "trace model '" + trace.model + "' differs from the scenario's '" + card.name + "'");
  }

  auto cost = sim::make_calibrated_cost_model(profile, sc.cost, topo.gpu_spec());
  const auto* calibrated = dynamic_cast<const sim::CalibratedCostModel*>(cost.get());
  sim::NetworkModelRegistry registry;
#ifdef MOESIM_HAVE_SIMGRID
  sim::register_simgrid_model(registry);
#endif
  const size_t num_layers = card.layers.size();
  std::vector<int32_t> moe_layer_of_layer(num_layers, -1);
  int32_t num_moe = 0;
  const sim::MoeSpec* moe = nullptr;
  for (size_t l = 0; l < num_layers; ++l) {
    if (card.layers[l].ffn.is_moe) {
      moe_layer_of_layer[l] = num_moe++;
      if (!moe) moe = &card.layers[l].ffn.moe;
    }
  }
  // The measured layer standing for each model layer (replay profiles run a subset).
  sim::ValidationInput input;
  input.measured_layer_of_layer.assign(num_layers, -1);
  for (size_t l = 0; l < num_layers; ++l) input.is_moe_layer.push_back(moe_layer_of_layer[l] >= 0);
  for (size_t l = 0; l < num_layers; ++l) {
    if (meas.layer_scales.count(static_cast<int32_t>(l))) {
      input.measured_layer_of_layer[l] = static_cast<int32_t>(l);
      continue;
    }
    for (const auto& [ml, scale] : meas.layer_scales) {
      if (ml < static_cast<int32_t>(num_layers) && card.layers[ml] == card.layers[l]) {
        input.measured_layer_of_layer[l] = ml;
        break;
      }
    }
  }
  std::set<int64_t> measured_steps;
  for (const sim::StepSample& s : meas.steps) measured_steps.insert(s.step);

  const int32_t tp = dep.attention == sim::AttentionParallel::kTensor ? dep.attention_tp : 1;
  for (int32_t ri = 0; ri < static_cast<int32_t>(trace.replica_gpus.size()); ++ri) {
    const std::vector<int32_t>& gpus = trace.replica_gpus[ri];
    const int32_t n = static_cast<int32_t>(gpus.size());
    if (n != dep.gpus_per_replica) {
      throw sim::ConfigError(trace_path, 1, 0, "replicas.gpus",
                             "replica " + std::to_string(ri) + " has " + std::to_string(n) +
                                 " GPUs; the scenario deploys " +
                                 std::to_string(dep.gpus_per_replica));
    }
    std::unique_ptr<sim::ExpertPlacement> placement;
    std::unique_ptr<sim::NetworkModel> network;
    std::unique_ptr<sim::RoutingModel> routing;
    // The replica's placement from expert -> global GPU lists (the header's or a placement
    // record's); ConfigError naming the trace for an expert without a GPU in the replica.
    auto replica_placement = [&](const std::vector<std::vector<int32_t>>& expert_gpus) {
      std::vector<std::vector<int32_t>> local(expert_gpus.size());
      for (size_t e = 0; e < expert_gpus.size(); ++e) {
        for (int32_t g : expert_gpus[e]) {
          auto it = std::find(gpus.begin(), gpus.end(), g);
          if (it != gpus.end()) local[e].push_back(static_cast<int32_t>(it - gpus.begin()));
        }
      }
      return sim::ExpertPlacement(static_cast<int32_t>(moe->num_routed_experts), n,
                                  std::min(n, topo.gpus_per_node()),
                                  static_cast<int32_t>(moe->num_shared_experts), local, trace_path);
    };
    if (moe) {
      placement = std::make_unique<sim::ExpertPlacement>(replica_placement(trace.expert_gpus));
      network = registry.make(sc.network_model, topo);
      routing = std::make_unique<sim::RecordedRoutingModel>(trace, ri, sim::routing_shape_of(card),
                                                            moe_layer_of_layer);
    }
    std::vector<sim::GpuId> gpu_ids;
    for (int32_t g : gpus) gpu_ids.emplace_back(g);
    sim::StepModel model(card, topo, dep, gpu_ids, placement.get(), *cost, network.get(),
                         routing.get());
    // Placement records (replication, EPLB) apply from their step on; the reader checked that a
    // replica's records come in its step order.
    std::vector<const sim::TracePlacementChange*> changes;
    for (const sim::TracePlacementChange& c : trace.placement_changes) {
      if (c.replica < 0 || c.replica == ri) changes.push_back(&c);
    }
    size_t next_change = 0;
    for (const sim::TraceStep& ts : trace.steps) {
      if (ts.replica != ri) continue;
      for (; next_change < changes.size() && changes[next_change]->step <= ts.step; ++next_change) {
        // The step model reads the placement at every MoE layer.
        if (placement) *placement = replica_placement(changes[next_change]->expert_gpus);
      }
      if (!measured_steps.count(ts.step)) continue;
      std::vector<std::vector<sim::SeqSlice>> ranks(static_cast<size_t>(n / tp));
      for (const sim::TraceSequence& q : ts.sequences) {
        auto it = std::find(gpus.begin(), gpus.end(), q.gpu);
        if (it == gpus.end() || (it - gpus.begin()) % tp != 0) {
          throw sim::ConfigError(trace_path, 0, 0, "step " + std::to_string(ts.step) + ".sequences",
                                 "GPU " + std::to_string(q.gpu) + " is not an attention rank");
        }
        ranks[static_cast<size_t>((it - gpus.begin()) / tp)].push_back(
            sim::SeqSlice{q.new_tokens, q.context_tokens, q.prefill});
      }
      sim::ResimulatedStep rs;
      rs.step = ts.step;
      rs.replica = ri;
      rs.gpus = gpus;
      rs.microbatch_overlap = dep.microbatch_overlap;
      PhaseObserver obs(&rs, gpus.size(), num_layers);
      rs.duration_s = sim::to_seconds(model.run(ts.step, ranks, &obs).duration_ns);
      // The re-simulated combine moves the recorded bytes when routing and placement match (the
      // recorded dispatch bytes also carry the weight copies of placement policies).
      for (const PhaseObserver::LayerBytes& b : obs.layer_bytes()) {
        auto it = std::find_if(ts.layers.begin(), ts.layers.end(), [&](const sim::TraceLayer& l) {
          return l.layer_idx == b.layer_idx;
        });
        ++input.num_moe_layers_checked;
        if (it == ts.layers.end() || it->combine_bytes != b.combine) ++input.num_routing_mismatches;
      }
      input.steps.push_back(std::move(rs));
    }
  }
  input.measurements = &meas;
  input.profile = &profile;
  input.trace = &trace;
  input.num_out_of_range_queries = cost->num_out_of_range_queries();
  input.num_proxy_queries = calibrated ? calibrated->num_proxy_queries() : 0;
  sim::ValidationReport report = sim::validate(input);

  if (json) {
    sim::write_validation_json(std::cout, report);
  } else {
    sim::write_validation_text(std::cout, report);
  }
  if (out_dir) {
    fs::path dir(*out_dir);
    fs::create_directories(dir);
    write_file(dir / "report.json",
               [&](std::ostream& os) { sim::write_validation_json(os, report); });
    write_file(dir / "report.md",
               [&](std::ostream& os) { sim::write_validation_markdown(os, report); });
    write_file(dir / "ops.csv", [&](std::ostream& os) { sim::write_ops_csv(os, report); });
    write_file(dir / "phases.csv", [&](std::ostream& os) { sim::write_phases_csv(os, report); });
    write_file(dir / "steps.csv", [&](std::ostream& os) { sim::write_steps_csv(os, report); });
  }
  return 0;
}

}  // namespace moesim::cli

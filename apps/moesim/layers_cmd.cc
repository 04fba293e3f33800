// `moesim layers SCENARIO`: per-layer communication versus expert compute for one decode step
// as the batch grows, with the scenario's routing skew and with uniform routing (the teaching
// case of the all-to-all crossover).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "apps/moesim/cli.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/layer_study.h"
#include "sim/serving/replica_builder.h"

namespace moesim::cli {
namespace {

constexpr const char* kUsage =
    "usage: moesim layers SCENARIO [--batches 4,8,16,32,64,128] [--context TOKENS] [--seed N]\n"
    "                     [--network-model NAME] [--json]\n\n"
    "One decode step of the scenario's replica per batch size (sequences per GPU), with the\n"
    "scenario's routing skew and with uniform routing, on the scenario's network model\n"
    "([network] model; --network-model NAME replaces it: bottleneck, bottleneck_factored, fluid,\n"
    "simgrid when built with it; fluid and simgrid take minutes per batch size at EP64). The\n"
    "header names the model used. Prints per MoE layer (averaged over MoE layers):\n"
    "  a2a          dispatch + combine time (with microbatch_overlap: running under compute)\n"
    "  exposed      MoE layer time - the slowest GPU's compute in it (attention, router,\n"
    "               experts): what the all-to-all adds to the layer\n"
    "  experts      the slowest and the mean GPU's routed + shared expert time\n"
    "  wait         the mean barrier wait per GPU ('-' and JSON null with microbatch_overlap:\n"
    "               the overlapped timeline records no barrier waits)\n"
    "  a2a/experts  a2a over the slowest GPU's expert time; the marker shows where it first\n"
    "               exceeds 1 (with overlap: where expert compute no longer hides it)\n";

std::vector<int64_t> parse_batches(const std::string& text) {
  std::vector<int64_t> out;
  for (double v : parse_number_list("--batches", text)) {
    if (v < 1 || v != std::floor(v) || v > 1e9) {
      std::ostringstream os;
      os << "--batches: bad value '" << v << "' (sequences per GPU: a whole number >= 1)";
      throw UsageError{os.str()};
    }
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

}  // namespace

int layers_command(const std::vector<std::string>& argv) {
  Args args(argv, {"--batches", "--context", "--seed", "--network-model"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& path = args.positional(0, "SCENARIO");
  std::vector<int64_t> batches = parse_batches(args.value_or("--batches", "4,8,16,32,64,128"));
  int64_t context = args.int_value("--context").value_or(4096);
  int64_t seed = args.int_value("--seed").value_or(1);
  const std::optional<std::string> network_model = args.value("--network-model");
  bool json = args.flag("--json");
  args.finish(1);
  if (context < 0) throw UsageError{"--context must be >= 0"};
  if (seed < 0) throw UsageError{"--seed must be >= 0"};
  const std::vector<std::string> models = sim::builtin_network_models().names();
  if (network_model && std::find(models.begin(), models.end(), *network_model) == models.end()) {
    std::string valid;
    for (const std::string& m : models) valid += (valid.empty() ? "" : ", ") + m;
    throw UsageError{"--network-model: unknown model '" + *network_model + "' (valid: " + valid +
                     ")"};
  }
  sim::Scenario sc = sim::load_scenario(path);
  if (network_model) sc.network_model = *network_model;
  auto rows = sim::run_layer_study(sc, batches, context, static_cast<uint64_t>(seed));
  const bool overlap = sc.deployment.microbatch_overlap;
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows) {
      j.push_back({{"seqs_per_gpu", r.seqs_per_gpu},
                   {"routing", r.skewed ? "scenario" : "uniform"},
                   {"network_model", sc.network_model},
                   {"microbatch_overlap", overlap},
                   {"comm_us_per_layer", r.comm_us},
                   {"exposed_comm_us_per_layer", r.exposed_comm_us},
                   {"moe_layer_us", r.layer_us},
                   {"compute_max_us_per_layer", r.compute_max_us},
                   {"expert_max_us_per_layer", r.expert_max_us},
                   {"expert_mean_us_per_layer", r.expert_mean_us},
                   {"barrier_wait_mean_us_per_layer",
                    overlap ? nlohmann::json(nullptr) : nlohmann::json(r.wait_mean_us)},
                   {"step_ms", r.step_ms}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("per MoE layer, one decode step, %s on %s, EP%d, context %lld\n",
              sc.model->name.c_str(), sc.topology->name().c_str(), sc.deployment.gpus_per_replica,
              static_cast<long long>(context));
  std::printf("network model %s, micro-batch overlap %s\n", sc.network_model.c_str(),
              overlap ? "on" : "off");
  std::printf(
      "a2a: dispatch + combine%s\n"
      "exposed: MoE layer time - the slowest GPU's compute in it (attention + router + experts)\n"
      "wait: mean barrier wait per GPU%s\n"
      "a2a/experts: a2a over the slowest GPU's expert time\n",
      overlap ? " (overlapped: it runs under expert compute)" : "",
      overlap ? " (-: the overlapped timeline records no barrier waits)" : "");
  for (bool skewed : {true, false}) {
    std::printf(
        "\nrouting: %s\n",
        skewed ? ("scenario (" +
                  (sc.routing.preset.empty() ? std::string("custom") : sc.routing.preset) + ")")
                     .c_str()
               : "uniform");
    std::printf(
        "  seqs/GPU   a2a us   exposed us   experts max us   experts mean us   wait us   "
        "step ms   a2a/experts\n");
    bool crossed = false;
    for (const auto& r : rows) {
      if (r.skewed != skewed) continue;
      double ratio = r.expert_max_us > 0 ? r.comm_us / r.expert_max_us : 0;
      const char* marker = overlap ? "   <- expert compute no longer hides the all-to-all"
                                   : "   <- all-to-all dominates from here";
      char wait[32];
      std::snprintf(wait, sizeof(wait), "%.1f", r.wait_mean_us);
      std::printf("  %8lld %8.1f %12.1f %16.1f %17.1f %9s %9.2f %13.2f%s\n",
                  static_cast<long long>(r.seqs_per_gpu), r.comm_us, r.exposed_comm_us,
                  r.expert_max_us, r.expert_mean_us, overlap ? "-" : wait, r.step_ms, ratio,
                  (!crossed && ratio > 1.0) ? marker : "");
      if (ratio > 1.0) crossed = true;
    }
  }
  return 0;
}

}  // namespace moesim::cli

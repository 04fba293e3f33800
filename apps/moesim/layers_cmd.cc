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
    "                     [--network-model NAME] [--overlap SCHEDULE] [--prefill TOKENS]\n"
    "                     [--timeline] [--json]\n\n"
    "One decode step of the scenario's replica per batch size (sequences per GPU), with the\n"
    "scenario's routing skew and with uniform routing, on the scenario's network model\n"
    "([network] model; --network-model NAME replaces it: bottleneck, bottleneck_factored, fluid,\n"
    "simgrid when built with it; fluid and simgrid take minutes per batch size at EP64). With\n"
    "[speculative], each sequence verifies 1 + k tokens and the step runs the draft passes. The\n"
    "header names the model used. --overlap replaces [deployment] overlap (none, simple,\n"
    "two_microbatch, decode_pipeline); --prefill TOKENS makes each sequence a prefill chunk of\n"
    "TOKENS new tokens (over --context cached ones) instead of one decode token; --timeline\n"
    "also prints GPU 0's spans of the middle MoE layer for the first batch size (scenario\n"
    "routing): start and duration from the layer's start (with --json the output becomes\n"
    "{\"rows\": [...], \"timeline\": [...]}). Prints per MoE layer (averaged over MoE layers):\n"
    "  a2a          dispatch + combine time (with overlap: running under compute)\n"
    "  exposed      MoE layer time - the slowest GPU's compute in it (attention, router,\n"
    "               experts): what the all-to-all adds to the layer\n"
    "  experts      the slowest and the mean GPU's routed + shared expert time\n"
    "  wait         the mean barrier wait per GPU ('-' and JSON null with overlap: the\n"
    "               overlapped timelines record no barrier waits)\n"
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
  Args args(argv,
            {"--batches", "--context", "--seed", "--network-model", "--overlap", "--prefill"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& path = args.positional(0, "SCENARIO");
  std::vector<int64_t> batches = parse_batches(args.value_or("--batches", "4,8,16,32,64,128"));
  int64_t context = args.int_value("--context").value_or(4096);
  int64_t seed = args.int_value("--seed").value_or(1);
  const std::optional<std::string> network_model = args.value("--network-model");
  const std::optional<std::string> overlap_name = args.value("--overlap");
  const int64_t prefill = args.int_value("--prefill").value_or(0);
  const bool show_timeline = args.flag("--timeline");
  bool json = args.flag("--json");
  args.finish(1);
  if (context < 0) throw UsageError{"--context must be >= 0"};
  if (seed < 0) throw UsageError{"--seed must be >= 0"};
  if (prefill < 0) throw UsageError{"--prefill must be >= 0"};
  sim::OverlapMode overlap_mode = sim::OverlapMode::kNone;
  if (overlap_name && !sim::parse_overlap_mode(*overlap_name, &overlap_mode)) {
    throw UsageError{"--overlap: unknown schedule '" + *overlap_name +
                     "' (valid: none, simple, two_microbatch, decode_pipeline)"};
  }
  const std::vector<std::string> models = sim::builtin_network_models().names();
  if (network_model && std::find(models.begin(), models.end(), *network_model) == models.end()) {
    std::string valid;
    for (const std::string& m : models) valid += (valid.empty() ? "" : ", ") + m;
    throw UsageError{"--network-model: unknown model '" + *network_model + "' (valid: " + valid +
                     ")"};
  }
  sim::Scenario sc = sim::load_scenario(path);
  if (network_model) sc.network_model = *network_model;
  if (overlap_name) sc.deployment.overlap = overlap_mode;
  std::vector<sim::LayerStudySpan> timeline;
  sim::LayerStudyOptions options;
  options.context_tokens = context;
  options.prefill_tokens = prefill;
  options.seed = static_cast<uint64_t>(seed);
  options.timeline = show_timeline ? &timeline : nullptr;
  auto rows = sim::run_layer_study(sc, batches, options);
  const bool overlap = sc.deployment.overlap != sim::OverlapMode::kNone;
  const char* schedule = sim::overlap_mode_name(sc.deployment.overlap);
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows) {
      j.push_back({{"seqs_per_gpu", r.seqs_per_gpu},
                   {"routing", r.skewed ? "scenario" : "uniform"},
                   {"network_model", sc.network_model},
                   {"microbatch_overlap", overlap},
                   {"overlap", schedule},
                   {"prefill_tokens", prefill},
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
    if (show_timeline) {
      nlohmann::json t = nlohmann::json::array();
      for (const auto& sp : timeline) {
        t.push_back(
            {{"name", sp.name}, {"start_us", sp.start_us}, {"duration_us", sp.duration_us}});
      }
      j = {{"rows", j}, {"timeline", t}};
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (prefill > 0) {
    std::printf(
        "per MoE layer, one prefill step (chunks of %lld tokens), %s on %s, EP%d, context "
        "%lld\n",
        static_cast<long long>(prefill), sc.model->name.c_str(), sc.topology->name().c_str(),
        sc.deployment.gpus_per_replica, static_cast<long long>(context));
  } else {
    std::printf("per MoE layer, one decode step, %s on %s, EP%d, context %lld\n",
                sc.model->name.c_str(), sc.topology->name().c_str(), sc.deployment.gpus_per_replica,
                static_cast<long long>(context));
  }
  std::printf("network model %s, overlap %s\n", sc.network_model.c_str(), schedule);
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
  if (show_timeline) {
    std::printf(
        "\nGPU 0, middle MoE layer, %lld seqs/GPU, scenario routing (us from the layer's "
        "start)\n",
        static_cast<long long>(batches.front()));
    std::printf("  %-34s %10s %10s %10s\n", "span", "start", "duration", "end");
    for (const auto& sp : timeline) {
      std::printf("  %-34s %10.1f %10.1f %10.1f\n", sp.name.c_str(), sp.start_us, sp.duration_us,
                  sp.start_us + sp.duration_us);
    }
  }
  return 0;
}

}  // namespace moesim::cli

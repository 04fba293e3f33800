// `moesim layers SCENARIO`: per-layer communication versus expert compute for one decode step
// as the batch grows, with the scenario's routing skew and with uniform routing (the teaching
// case of the all-to-all crossover).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/moesim/cli.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/layer_study.h"

namespace moesim::cli {
namespace {

constexpr const char* kUsage =
    "usage: moesim layers SCENARIO [--batches 4,8,16,32,64,128] [--context TOKENS] [--seed N]\n"
    "                     [--json]\n\n"
    "One decode step of the scenario's replica per batch size (sequences per GPU), with the\n"
    "scenario's routing skew and with uniform routing; prints per MoE layer the dispatch +\n"
    "combine time, the slowest and mean GPU's expert time, the mean barrier wait, and where\n"
    "communication outgrows expert compute.\n";

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
  Args args(argv, {"--batches", "--context", "--seed"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& path = args.positional(0, "SCENARIO");
  std::vector<int64_t> batches = parse_batches(args.value_or("--batches", "4,8,16,32,64,128"));
  int64_t context = args.int_value("--context").value_or(4096);
  int64_t seed = args.int_value("--seed").value_or(1);
  bool json = args.flag("--json");
  args.finish(1);
  if (context < 0) throw UsageError{"--context must be >= 0"};
  if (seed < 0) throw UsageError{"--seed must be >= 0"};
  sim::Scenario sc = sim::load_scenario(path);
  auto rows = sim::run_layer_study(sc, batches, context, static_cast<uint64_t>(seed));
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows) {
      j.push_back({{"seqs_per_gpu", r.seqs_per_gpu},
                   {"routing", r.skewed ? "scenario" : "uniform"},
                   {"comm_us_per_layer", r.comm_us},
                   {"expert_max_us_per_layer", r.expert_max_us},
                   {"expert_mean_us_per_layer", r.expert_mean_us},
                   {"barrier_wait_mean_us_per_layer", r.wait_mean_us},
                   {"step_ms", r.step_ms}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("per MoE layer, one decode step, %s on %s, EP%d, context %lld\n",
              sc.model->name.c_str(), sc.topology->name().c_str(), sc.deployment.gpus_per_replica,
              static_cast<long long>(context));
  for (bool skewed : {true, false}) {
    std::printf(
        "\nrouting: %s\n",
        skewed ? ("scenario (" +
                  (sc.routing.preset.empty() ? std::string("custom") : sc.routing.preset) + ")")
                     .c_str()
               : "uniform");
    std::printf(
        "  seqs/GPU   a2a us   experts max us   experts mean us   wait us   step ms   "
        "a2a/experts\n");
    bool crossed = false;
    for (const auto& r : rows) {
      if (r.skewed != skewed) continue;
      double ratio = r.expert_max_us > 0 ? r.comm_us / r.expert_max_us : 0;
      std::printf("  %8lld %8.1f %16.1f %17.1f %9.1f %9.2f %12.2f%s\n",
                  static_cast<long long>(r.seqs_per_gpu), r.comm_us, r.expert_max_us,
                  r.expert_mean_us, r.wait_mean_us, r.step_ms, ratio,
                  (!crossed && ratio > 1.0) ? "   <- all-to-all dominates from here" : "");
      if (ratio > 1.0) crossed = true;
    }
  }
  return 0;
}

}  // namespace moesim::cli

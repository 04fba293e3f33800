// `moesim prune SCENARIO`: the expert-pruning study (sim/api/prune.h,
// sim/study/pruning_study.h): for each fraction, experts kept per layer, weight memory, decode
// step latency and routing mass lost.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "apps/moesim/progress.h"
#include "sim/api/prune.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Profiles the scenario's expert routing (exact per-token top-k sets), prunes the least-\n"
    "activated fraction of experts in every MoE layer, and prints per fraction: experts kept per\n"
    "layer, expert slots and weight memory per GPU, the KV pool left and the decode batch it\n"
    "holds, one replica's decode step latency, and the routing mass lost (selections that hit a\n"
    "pruned expert, on held-out tokens; those tokens are re-routed to their next choice).\n"
    "Model and defaults: docs/policies/expert_pruning.md.";

std::vector<double> parse_fractions(const std::string& text) {
  std::vector<double> out = parse_number_list("--fractions", text);
  for (double f : out) {
    if (!(f >= 0.0 && f < 1.0)) {
      std::ostringstream os;
      os << "--fractions: " << f << " is not in [0, 1)";
      throw UsageError{os.str()};
    }
  }
  return out;
}

}  // namespace

int prune_command(const std::vector<std::string>& argv) {
  sim::api::PruneRequest request;
  std::optional<int64_t> batch, context, profile_steps, tokens_per_step;
  bool json = false, progress = false;
  CommandLine cl("prune SCENARIO [options]", kDescription);
  cl.positional("SCENARIO", &request.scenario_path, "a scenario file")
      .option("--batch-per-gpu", &batch, "N", "decode sequences per attention rank (default 64)")
      .option("--context", &context, "TOKENS", "context of every decode sequence (default 4096)")
      .option_with("--fractions", "F,...",
                   "pruned fractions, each in [0, 1) (default 0,0.2,0.4,0.6)",
                   [&](const std::string& text) { request.fractions = parse_fractions(text); })
      .option("--profile-steps", &profile_steps, "N",
              "steps profiled, and held out for the mass lost (default 8)")
      .option("--tokens-per-step", &tokens_per_step, "N",
              "tokens sampled per step and layer (default 4096)")
      .option("--write-plan", &request.plan_path, "FILE",
              "write the plan of the (single) fraction as JSON, for [policies.expert_pruning] "
              "plan_file = FILE in a scenario")
      .flag("--json", &json, "one JSON document, units in key names")
      .flag("--progress", &progress,
            "stages done and time left on stderr even when it is not a terminal");
  if (!cl.parse(argv)) return 0;
  if (batch) request.batch_per_gpu = *batch;
  if (context) request.context_tokens = *context;
  if (profile_steps) request.profile_steps = *profile_steps;
  if (tokens_per_step) request.tokens_per_step = *tokens_per_step;
  Progress bar = Progress::for_stderr("prune", "stages", progress);
  request.progress = bar.callback();
  const sim::study::PruningStudy study = sim::api::prune(request);
  const std::string out = json ? sim::study::format_pruning_study_json(study)
                               : sim::study::format_pruning_study_text(study);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace moesim::cli

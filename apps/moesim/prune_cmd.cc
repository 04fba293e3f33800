// `moesim prune SCENARIO [--batch-per-gpu N] [--fractions F,...] [--json]`: the expert-pruning
// study (sim/policy/pruning_study.h): for each fraction, experts kept per layer, weight memory,
// decode step latency and routing mass lost.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "apps/moesim/progress.h"
#include "sim/io/output_files.h"
#include "sim/policy/pruning_plan.h"
#include "sim/policy/pruning_study.h"
#include "sim/scenario/scenario.h"

namespace moesim::cli {
namespace {

const char kUsage[] =
    "usage: moesim prune SCENARIO [--batch-per-gpu N] [--context TOKENS] [--fractions F,...]\n"
    "                    [--profile-steps N] [--tokens-per-step N] [--json]\n"
    "                    [--write-plan FILE] [--progress]\n"
    "\n"
    "Profiles the scenario's expert routing (exact per-token top-k sets), prunes the least-\n"
    "activated fraction of experts in every MoE layer, and prints per fraction: experts kept per\n"
    "layer, expert slots and weight memory per GPU, the KV pool left and the decode batch it\n"
    "holds, one replica's decode step latency, and the routing mass lost (selections that hit a\n"
    "pruned expert, on held-out tokens; those tokens are re-routed to their next choice).\n"
    "Model and defaults: docs/policies/expert_pruning.md.\n"
    "\n"
    "  --batch-per-gpu N     decode sequences per attention rank (default 64)\n"
    "  --context TOKENS      context of every decode sequence (default 4096)\n"
    "  --fractions F,...     pruned fractions, each in [0, 1) (default 0,0.2,0.4,0.6)\n"
    "  --profile-steps N     steps profiled, and held out for the mass lost (default 8)\n"
    "  --tokens-per-step N   tokens sampled per step and layer (default 4096)\n"
    "  --json                one JSON document, units in key names\n"
    "  --write-plan FILE     write the plan of the (single) fraction as JSON, for\n"
    "                        [policies.expert_pruning] plan_file = FILE in a scenario\n"
    "  --progress            stages done and time left on stderr even when it is not a\n"
    "                        terminal\n";

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
  Args args(argv, {"--batch-per-gpu", "--context", "--fractions", "--profile-steps",
                   "--tokens-per-step", "--write-plan"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& path = args.positional(0, "SCENARIO");
  sim::PruningStudyOptions opt;
  opt.batch_per_gpu = args.int_value("--batch-per-gpu").value_or(opt.batch_per_gpu);
  opt.context_tokens = args.int_value("--context").value_or(opt.context_tokens);
  if (auto f = args.value("--fractions")) opt.fractions = parse_fractions(*f);
  const int64_t profile_steps =
      args.int_value("--profile-steps").value_or(opt.profile.profile_steps);
  const int64_t tokens_per_step =
      args.int_value("--tokens-per-step").value_or(opt.profile.tokens_per_step);
  const bool json = args.flag("--json");
  const std::optional<std::string> write_plan = args.value("--write-plan");
  Progress bar = Progress::for_stderr("prune", "stages", args.flag("--progress"));
  args.finish(1);
  if (opt.batch_per_gpu < 1 || opt.batch_per_gpu > (1 << 20)) {
    throw UsageError{"--batch-per-gpu must be in [1, 1048576]"};
  }
  if (opt.context_tokens < 1) throw UsageError{"--context must be >= 1"};
  if (profile_steps < 1 || profile_steps > (1 << 20)) {
    throw UsageError{"--profile-steps must be in [1, 1048576]"};
  }
  if (tokens_per_step < 1 || tokens_per_step > (1 << 24)) {
    throw UsageError{"--tokens-per-step must be in [1, 16777216]"};
  }
  opt.profile.profile_steps = static_cast<int32_t>(profile_steps);
  opt.profile.tokens_per_step = static_cast<int32_t>(tokens_per_step);
  if (write_plan && opt.fractions.size() != 1) {
    throw UsageError{"--write-plan needs exactly one value in --fractions"};
  }
  if (write_plan) sim::io::check_output_file(*write_plan, "--write-plan");

  const sim::Scenario scenario = sim::load_scenario(path);
  if (opt.context_tokens > scenario.model->max_context_tokens) {
    throw UsageError{"--context " + std::to_string(opt.context_tokens) +
                     " exceeds the model's max_context_tokens (" +
                     std::to_string(scenario.model->max_context_tokens) + ")"};
  }
  opt.progress = bar.callback();
  const sim::PruningStudy study = sim::run_pruning_study(scenario, opt);
  const std::string out =
      json ? sim::format_pruning_study_json(study) : sim::format_pruning_study_text(study);
  std::fputs(out.c_str(), stdout);
  if (write_plan) {
    sim::io::write_file_atomically(*write_plan, [&](std::ostream& os) {
      os << sim::format_pruning_plan_json(study.plans.front(), study.model_name,
                                          opt.fractions.front());
    });
  }
  return 0;
}

}  // namespace moesim::cli

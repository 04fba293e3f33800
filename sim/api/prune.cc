#include "sim/api/prune.h"

#include <sstream>

#include "sim/api/usage_error.h"
#include "sim/io/output_files.h"
#include "sim/policy/pruning_plan.h"
#include "sim/scenario/scenario.h"

namespace moesim::sim::api {
namespace {

void check_request(const PruneRequest& r) {
  for (double f : r.fractions) {
    if (!(f >= 0.0 && f < 1.0)) {
      std::ostringstream os;
      os << "--fractions: " << f << " is not in [0, 1)";
      throw UsageError{os.str()};
    }
  }
  if (r.fractions.empty()) throw UsageError{"--fractions: empty list"};
  if (r.batch_per_gpu < 1 || r.batch_per_gpu > (1 << 20)) {
    throw UsageError{"--batch-per-gpu must be in [1, 1048576]"};
  }
  if (r.context_tokens < 1) throw UsageError{"--context must be >= 1"};
  if (r.profile_steps < 1 || r.profile_steps > (1 << 20)) {
    throw UsageError{"--profile-steps must be in [1, 1048576]"};
  }
  if (r.tokens_per_step < 1 || r.tokens_per_step > (1 << 24)) {
    throw UsageError{"--tokens-per-step must be in [1, 16777216]"};
  }
  if (r.plan_path && r.fractions.size() != 1) {
    throw UsageError{"--write-plan needs exactly one value in --fractions"};
  }
  if (r.plan_path) io::check_output_file(*r.plan_path, "--write-plan");
}

}  // namespace

study::PruningStudy prune(const PruneRequest& request) {
  check_request(request);
  study::PruningStudyOptions opt;
  opt.fractions = request.fractions;
  opt.batch_per_gpu = request.batch_per_gpu;
  opt.context_tokens = request.context_tokens;
  opt.profile.profile_steps = static_cast<int32_t>(request.profile_steps);
  opt.profile.tokens_per_step = static_cast<int32_t>(request.tokens_per_step);
  const Scenario scenario = load_scenario(request.scenario_path);
  if (opt.context_tokens > scenario.model->max_context_tokens) {
    throw UsageError{"--context " + std::to_string(opt.context_tokens) +
                     " exceeds the model's max_context_tokens (" +
                     std::to_string(scenario.model->max_context_tokens) + ")"};
  }
  opt.progress = request.progress;
  study::PruningStudy study = study::run_pruning_study(scenario, opt);
  study.options.progress = nullptr;
  if (request.plan_path) {
    io::write_file_atomically(*request.plan_path, [&](std::ostream& os) {
      os << format_pruning_plan_json(study.plans.front(), study.model_name,
                                     request.fractions.front());
    });
  }
  return study;
}

}  // namespace moesim::sim::api

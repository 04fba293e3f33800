#include "sim/api/sweep.h"

#include <sstream>

#include "sim/api/text_format.h"
#include "sim/api/usage_error.h"
#include "sim/config/config_error.h"
#include "sim/config/input_files.h"
#include "sim/io/output_files.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/sweep_merge.h"
#include "sim/study/sweep_output.h"
#include "sim/study/sweep_plan.h"

namespace moesim::sim::api {
namespace {

void check_request(const SweepRequest& r, const study::RankGroup& ranks) {
  if (ranks.rank() == 0) check_plan_path(r.plan_path);
  if (r.plan_path && r.shard) {
    throw UsageError{"--plan needs the whole sweep: run moesim sweep plan on the merged CSV"};
  }
  if (r.min_attainment && !(*r.min_attainment >= 0 && *r.min_attainment <= 1)) {
    throw UsageError{"--min-attainment must be in [0, 1]"};
  }
  if (r.max_duration_factor && !(*r.max_duration_factor >= 1 && *r.max_duration_factor <= 100)) {
    throw UsageError{"--max-duration-factor must be in [1, 100]"};
  }
}

void check_outputs(const SweepRequest& r, const study::RankGroup& ranks) {
  if (r.resume && !r.out_path) throw UsageError{"--resume needs --out FILE.csv"};
  if (r.resume && ranks.active()) throw UsageError{"--resume cannot be combined with mpirun"};
  if (r.threads && (*r.threads < 1 || *r.threads > 4096)) {
    throw UsageError{"--threads must be in 1..4096"};
  }
  if (r.shard && ranks.active()) {
    throw UsageError{"--shard cannot be combined with mpirun (the ranks shard the sweep)"};
  }
}

study::SweepPlanner planner_of(const SweepRequest& r) {
  study::SweepPlanner planner;
  planner.gpu_price_per_hour = r.gpu_price_per_hour;
  if (r.slo) {
    planner.limits = study::parse_search_slo(*r.slo);
    if (planner.limits.request_ttft_ms || planner.limits.request_tpot_ms) {
      throw ConfigError("--slo", 0, 0, planner.limits.request_ttft_ms ? "ttft_ms" : "tpot_ms",
                        "a sweep's per-request limits are each scenario's [slo] ttft_ms / "
                        "tpot_ms (sweep slo.ttft_ms as a parameter to vary them)");
    }
  }
  if (r.min_attainment) planner.limits.min_attainment = *r.min_attainment;
  return planner;
}

study::Plan plan_of_csv(const std::string& csv, const std::string& name,
                        const std::optional<std::string>& plan_path) {
  std::istringstream in(csv);
  study::Plan plan = study::plan_from_sweep_csv(in, name);
  if (plan_path) write_plan_file(plan, *plan_path);
  return plan;
}

}  // namespace

void check_gpu_price(const std::optional<double>& price) {
  if (price && !(*price > 0 && *price < 1e9)) {
    throw UsageError{"--gpu-price-per-hour must be > 0 (US dollars per GPU-hour)"};
  }
}

void check_plan_path(const std::optional<std::string>& plan_path) {
  if (!plan_path) return;
  study::check_plan_path(*plan_path, "--plan");
  io::check_output_file(*plan_path, "--plan");
}

void write_plan_file(const study::Plan& plan, const std::string& path) {
  io::write_file_atomically(path, [&](std::ostream& os) { study::write_plan(plan, path, os); });
}

SweepReport sweep(const SweepRequest& request) {
  const study::SingleProcess one;
  const study::RankGroup& ranks = request.ranks ? *request.ranks : one;
  check_gpu_price(request.gpu_price_per_hour);
  check_request(request, ranks);
  const study::SweepPlanner planner = planner_of(request);
  check_outputs(request, ranks);

  const study::SweepSpec spec = study::load_sweep(request.sweep_path);
  const study::ScenarioTemplate scenario = study::ScenarioTemplate::load(spec.scenario_path);
  study::check_sweep(spec, scenario);
  study::SweepOptions options;
  options.num_threads =
      request.threads ? static_cast<int32_t>(*request.threads) : study::default_num_threads();
  if (request.shard) options.shard = study::parse_shard(*request.shard);
  options.planner = planner;
  options.max_duration_factor = request.max_duration_factor.value_or(5);
  // Under mpirun rank r runs the shard r + 1 of N.
  if (ranks.active()) options.shard = study::Shard{ranks.rank() + 1, ranks.size()};
  if (request.out_path && ranks.rank() == 0) io::check_output_file(*request.out_path, "--out");
  if (request.resume && !study::is_plain_output_file(*request.out_path)) {
    throw UsageError{"--resume needs --out to name a regular file"};
  }

  const study::SweepOutcome outcome =
      study::write_sweep(spec, scenario, options, {request.out_path, request.resume, request.csv},
                         ranks, request.progress);
  SweepReport report;
  report.stats = outcome.stats;
  report.is_root = outcome.is_root;
  if (!outcome.is_root) return report;
  report.num_resumed = outcome.num_resumed;
  report.num_sweep_runs = study::num_sweep_runs(spec);
  report.shard = options.shard;
  report.num_ranks = ranks.size();
  report.out_path = request.out_path;
  report.plan_path = request.plan_path;
  if (options.shard.count == 1 || ranks.active()) {
    report.plan = plan_of_csv(outcome.csv, request.out_path ? *request.out_path : "the sweep's CSV",
                              request.plan_path);
  }
  return report;
}

void write_sweep_summary(std::ostream& os, const SweepReport& r) {
  const char* arrow = r.out_path ? " -> " : "";
  const char* out = r.out_path ? r.out_path->c_str() : "";
  if (r.num_ranks > 1) {
    os << format_text("sweep: %lld runs on %d MPI ranks, %lld errors, %lld broken%s%s\n",
                      static_cast<long long>(r.stats.num_runs), r.num_ranks,
                      static_cast<long long>(r.stats.num_errors),
                      static_cast<long long>(r.stats.num_broken), arrow, out);
  } else {
    if (r.num_resumed > 0) {
      os << format_text("sweep: resumed after %lld runs already in %s.partial\n",
                        static_cast<long long>(r.num_resumed), out);
    }
    os << format_text("sweep: %lld runs (shard %d/%d of %lld), %lld errors, %lld broken%s%s\n",
                      static_cast<long long>(r.stats.num_runs), r.shard.index, r.shard.count,
                      static_cast<long long>(r.num_sweep_runs),
                      static_cast<long long>(r.stats.num_errors),
                      static_cast<long long>(r.stats.num_broken), arrow, out);
  }
  if (r.plan) {
    write_sweep_plan_summary(os, *r.plan, r.plan_path);
  } else {
    os << "sweep plan: a shard holds part of the grid; run moesim sweep plan on the merged CSV\n";
  }
}

void sweep_merge(const std::vector<std::string>& shard_paths, const std::string& out_path) {
  io::check_output_file(out_path, "OUT.csv");
  std::ostringstream merged;
  study::merge_sweep_csvs(shard_paths, merged);
  io::write_file_atomically(out_path, [&](std::ostream& os) { os << merged.str(); });
}

study::Plan sweep_plan(const std::string& csv_path, const std::optional<std::string>& plan_path) {
  check_plan_path(plan_path);
  return plan_of_csv(read_input_text(csv_path, InputKind::kData), csv_path, plan_path);
}

void write_sweep_plan_summary(std::ostream& os, const study::Plan& plan,
                              const std::optional<std::string>& plan_path) {
  os << "sweep plan:\n" << study::plan_summary_text(plan);
  if (plan_path) os << "  plan -> " << *plan_path << "\n";
}

}  // namespace moesim::sim::api

#include "sim/api/search.h"

#include "sim/api/sweep.h"
#include "sim/api/usage_error.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/search_journal.h"
#include "sim/study/search_record.h"
#include "sim/study/sweep.h"

namespace moesim::sim::api {
namespace {

void check_request(const SearchRequest& r, const study::RankGroup& ranks) {
  if (r.resume && !r.journal_path) throw UsageError{"--resume needs --journal FILE"};
  if (r.journal_path && ranks.active()) {
    throw UsageError{"--journal cannot be combined with mpirun"};
  }
  if (!r.slo) throw UsageError{"--slo is required"};
  // arrival.rate_per_s's ceiling (docs/scenarios.md).
  if (r.target_rate_per_s && !(*r.target_rate_per_s > 0 && *r.target_rate_per_s <= 1e9)) {
    throw UsageError{"--target-rate must be > 0 and at most 1e9 per second"};
  }
  if (r.min_attainment && !(*r.min_attainment >= 0 && *r.min_attainment <= 1)) {
    throw UsageError{"--min-attainment must be in [0, 1]"};
  }
  if (r.seed && *r.seed < 0) throw UsageError{"--seed must be >= 0"};
  if (r.tolerance && !(*r.tolerance > 0 && *r.tolerance <= 1)) {
    throw UsageError{"--tolerance must be in (0, 1]"};
  }
  if (r.max_doublings && (*r.max_doublings < 0 || *r.max_doublings > 30)) {
    throw UsageError{"--max-doublings must be in 0..30"};
  }
  if (r.max_duration_factor && !(*r.max_duration_factor >= 1 && *r.max_duration_factor <= 100)) {
    throw UsageError{"--max-duration-factor must be in [1, 100]"};
  }
  if (r.replications && (*r.replications < 1 || *r.replications > 100)) {
    throw UsageError{"--replications must be in 1..100"};
  }
  if (r.threads && (*r.threads < 1 || *r.threads > 4096)) {
    throw UsageError{"--threads must be in 1..4096"};
  }
}

study::SearchOptions search_options(const SearchRequest& r, const study::RankGroup& ranks) {
  study::SearchOptions opt;
  if (r.seed) opt.seed = static_cast<uint64_t>(*r.seed);
  if (r.tolerance) opt.rel_tolerance = *r.tolerance;
  if (r.max_doublings) opt.max_doublings = static_cast<int32_t>(*r.max_doublings);
  opt.replications = static_cast<int32_t>(r.replications.value_or(3));
  opt.max_duration_factor = r.max_duration_factor.value_or(5);
  opt.num_threads = r.threads ? static_cast<int32_t>(*r.threads) : study::default_num_threads();
  opt.target_rate_per_s = r.target_rate_per_s;
  opt.probe_infeasible = r.probe_infeasible;
  opt.full_probes = r.full_probes;
  opt.gpu_price_per_hour = r.gpu_price_per_hour;
  // Under mpirun rank r searches the configurations with config_idx % N == r; rank 0 gathers
  // them and prints what one process prints.
  opt.shard_index = ranks.rank();
  opt.shard_count = ranks.size();
  return opt;
}

study::SearchJournalHeader journal_header(const SearchRequest& r, const study::SearchSlo& slo,
                                          const study::SearchOptions& opt, size_t num_configs) {
  study::SearchJournalHeader h;
  h.probe_infeasible = r.probe_infeasible;
  h.full_probes = r.full_probes;
  h.gpu_price_per_hour = r.gpu_price_per_hour;
  h.scenario_path = r.scenario_path;
  h.slo = *r.slo;
  h.grid = r.grid_path ? *r.grid_path : "";
  h.min_attainment = slo.min_attainment;
  h.seed = r.seed;
  h.rel_tolerance = opt.rel_tolerance;
  h.max_doublings = opt.max_doublings;
  h.replications = opt.replications;
  h.max_duration_factor = opt.max_duration_factor;
  h.num_configs = num_configs;
  return h;
}

}  // namespace

SearchReport search(const SearchRequest& request) {
  const study::SingleProcess one;
  const study::RankGroup& ranks = request.ranks ? *request.ranks : one;
  check_gpu_price(request.gpu_price_per_hour);
  if (ranks.rank() == 0) check_plan_path(request.plan_path);
  check_request(request, ranks);

  SearchReport report;
  report.scenario_path = request.scenario_path;
  report.grid = request.grid_path.has_value();
  report.target_rate_per_s = request.target_rate_per_s;
  report.probe_infeasible = request.probe_infeasible;
  report.plan_path = request.plan_path;
  report.journal_path = request.journal_path;
  report.slo = study::parse_search_slo(*request.slo);
  if (request.min_attainment) report.slo.min_attainment = *request.min_attainment;
  const study::ScenarioTemplate scenario = study::ScenarioTemplate::load(request.scenario_path);
  std::vector<std::vector<study::Override>> configs(1);
  std::vector<std::string> parameter_keys;
  if (request.grid_path) {
    const study::SweepSpec spec = study::load_sweep(*request.grid_path, request.scenario_path);
    study::check_sweep(spec, scenario);
    configs = study::grid_configs(spec);
    for (const auto& p : spec.parameters) parameter_keys.push_back(p.key_path);
  } else {
    scenario.instantiate({});
  }
  study::SearchOptions opt = search_options(request, ranks);

  // The journal: --resume takes the configurations it holds instead of searching them again.
  std::optional<study::SearchJournal> journal;
  if (request.journal_path) {
    journal.emplace(*request.journal_path, journal_header(request, report.slo, opt, configs.size()),
                    request.resume);
    opt.already_done = journal->already_done();
    opt.on_searched = [&journal](const study::ConfigSearch& c) { journal->record(c); };
  }
  study::SearchResult& r = report.result;
  r = study::search_rates(scenario, configs, report.slo, opt, request.progress);
  if (journal) {
    report.num_resumed = journal->finish(r);
    if (request.target_rate_per_s) {
      r.cheapest = study::cheapest_config(r.configs, *request.target_rate_per_s);
    }
  }
  if (!study::gather_search_results(ranks, r, request.target_rate_per_s)) {
    report.is_root = false;
    return report;
  }
  report.plan = study::search_plan(r, parameter_keys, report.slo, request.target_rate_per_s);
  if (request.plan_path) write_plan_file(report.plan, *request.plan_path);
  return report;
}

}  // namespace moesim::sim::api

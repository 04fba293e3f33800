// `moesim search SCENARIO --slo ...`: for each configuration of a grid, the highest request rate
// that meets the SLOs (binary search on the rate multiplier, sim/study/search.h), and the
// cheapest configuration (fewest GPUs) that sustains --target-rate. Under `mpirun -np N` the
// ranks search the configurations and rank 0 prints the result (mpi_world.h).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/moesim/cli.h"
#include "apps/moesim/diagnosis_output.h"
#include "apps/moesim/mpi_world.h"
#include "apps/moesim/plan_options.h"
#include "apps/moesim/progress.h"
#include "base/json_depth.h"
#include "sim/config/config_error.h"
#include "sim/io/output_files.h"
#include "sim/metrics/figure_text.h"
#include "sim/study/parallel_runs.h"
#include "sim/study/search.h"
#include "sim/study/sweep.h"

namespace moesim::cli {
namespace {

constexpr const char* kUsage =
    "usage: moesim search SCENARIO --slo LIMITS [--grid SWEEP.toml] [--target-rate R]\n"
    "                     [--min-attainment A] [--seed N] [--tolerance T] [--max-doublings K]\n"
    "                     [--threads N] [--journal FILE [--resume]] [--gpu-price-per-hour USD]\n"
    "                     [--plan FILE.csv|FILE.json] [--probe-infeasible] [--full-probes]\n"
    "                     [--progress] [--json]\n\n"
    "Finds, for each configuration, the highest rate at which SCENARIO meets the SLOs, by scaling\n"
    "the workload's rate (arrival.rate_per_s, or rate_multiplier for traces) with a multiplier:\n"
    "1, then doubling or halving, then geometric bisection. Assumes that meeting the SLOs is\n"
    "monotone in the rate. Before probing, each configuration is diagnosed: the requests that can\n"
    "never meet a limit (isolated prefill vs the TTFT limit, isolated decode vs TPOT, a sequence\n"
    "that cannot fit the KV pool); one that is infeasible at any rate says so and is not probed.\n"
    "  --slo LIMITS        comma-separated NAME=VALUE: percentile limits\n"
    "                      {ttft,tpot,e2e,queueing}_{p50,p90,p99}_ms, per-request limits for the\n"
    "                      attainment ttft_ms, tpot_ms (default: the scenario's [slo]),\n"
    "                      e.g. ttft_p99_ms=2000,tpot_p99_ms=100\n"
    "  --grid SWEEP.toml   search every configuration of the sweep file's [[parameters]] grid,\n"
    "                      applied to SCENARIO (its scenario key and seeds are not used)\n"
    "  --target-rate R     name the configuration with the fewest GPUs sustaining R per second\n"
    "  --min-attainment A  fraction of decided requests within the per-request limits (default\n"
    "                      0.99)\n"
    "  --seed N            root seed of every probe (default: the scenario's [run] seed)\n"
    "  --tolerance T       stop when the bracket hi / lo <= 1 + T (default 0.02)\n"
    "  --max-doublings K   bracket multipliers within 2^-K .. 2^K (default 10)\n"
    "  --threads N         threads (default: hardware threads): configurations are searched in\n"
    "                      parallel, and spare threads run a configuration's next probes\n"
    "                      speculatively; the result is the same for every N\n"
    "  --journal FILE      record each searched configuration in FILE as it completes (fsync'd)\n"
    "  --resume            take the configurations FILE holds (a killed search) instead of\n"
    "                      searching them again; the output is an uninterrupted run's\n"
    "  --gpu-price-per-hour USD  price of one GPU-hour for the cost figures (default: the\n"
    "                      topology's [gpu] price_usd_per_hour; none: GPU-hours only)\n"
    "  --plan FILE         write the planner's table (per configuration at its max rate: tokens/s\n"
    "                      per GPU, cost per million tokens, feasible, pareto, cheapest) as CSV "
    "or\n"
    "                      JSON by the file's extension\n"
    "  --probe-infeasible  probe configurations the diagnosis finds infeasible at any rate too\n"
    "  --full-probes       run every probe to its end; by default a probe stops once its\n"
    "                      verdict fails whatever the rest of the run does (the same decisions;\n"
    "                      the failing probe's figures are those of the part it ran)\n"
    "  --progress          progress bar on stderr even when it is not a terminal\n"
    "  --json              print every probe as one JSON document\n"
    "under mpirun -np N: rank r searches configurations r, r+N, ...; rank 0 prints the result.\n"
    "exit codes: 0 success, 2 bad input\n";

std::string config_text(const sim::study::ConfigSearch& c) {
  return sim::study::overrides_text(c.overrides);
}

// What an MPI rank sends rank 0 of a configuration it searched (the overrides rank 0 has), in
// JSON, whose numbers read back to the same doubles.
nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
std::optional<double> optional_from(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<double>();
}

nlohmann::json diagnosis_json(const sim::study::Diagnosis& d) {
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : d.findings) {
    findings.push_back({f.limit, f.num_affected, f.num_counted, f.infeasible, f.text});
  }
  return {d.done,
          d.num_requests,
          d.num_context_too_long,
          d.num_kv_capacity,
          d.longest_prompt_tokens,
          d.longest_prefill_ms,
          d.where,
          findings};
}

sim::study::Diagnosis diagnosis_from(const nlohmann::json& j) {
  sim::study::Diagnosis d;
  d.done = j.at(0).get<bool>();
  d.num_requests = j.at(1).get<int64_t>();
  d.num_context_too_long = j.at(2).get<int64_t>();
  d.num_kv_capacity = j.at(3).get<int64_t>();
  d.longest_prompt_tokens = j.at(4).get<int64_t>();
  d.longest_prefill_ms = j.at(5).get<double>();
  d.where = j.at(6).get<std::string>();
  for (const auto& f : j.at(7)) {
    d.findings.push_back({f.at(0).get<std::string>(), f.at(1).get<int64_t>(),
                          f.at(2).get<int64_t>(), f.at(3).get<bool>(), f.at(4).get<std::string>()});
  }
  return d;
}

nlohmann::json searched_json(const sim::study::ConfigSearch& c) {
  nlohmann::json probes = nlohmann::json::array();
  for (const auto& p : c.probes) {
    probes.push_back({p.multiplier, p.rate_per_s, p.verdict.meets, p.verdict.num_met,
                      p.verdict.num_decided, p.verdict.attainment, p.verdict.reason,
                      optional_json(p.input_tokens_per_s), optional_json(p.output_tokens_per_s),
                      optional_json(p.ttft_p99_ms), optional_json(p.tpot_p99_ms)});
  }
  return {{"idx", c.config_idx},
          {"error", c.error},
          {"gpus", c.num_gpus},
          {"unit", c.rate_unit},
          {"base", c.base_rate_per_s},
          {"trace_rate", c.trace_rate_per_s},
          {"trace_multiplier", c.trace_multiplier},
          {"price", optional_json(c.price.usd_per_hour)},
          {"price_source", c.price.source},
          {"diagnosis", diagnosis_json(c.diagnosis)},
          {"not_probed", c.not_probed},
          {"found", c.search.found},
          {"max_ok", c.search.max_ok},
          {"min_fail", c.search.min_fail},
          {"n", c.search.num_probes},
          {"max_rate", c.max_rate_per_s},
          {"fail_rate", c.fail_rate_per_s},
          {"probes", probes}};
}

void read_searched(const nlohmann::json& j, sim::study::ConfigSearch& c) {
  c.error = j.at("error").get<std::string>();
  c.num_gpus = j.at("gpus").get<int64_t>();
  c.rate_unit = j.at("unit").get<std::string>();
  c.base_rate_per_s = j.at("base").get<double>();
  c.trace_rate_per_s = j.at("trace_rate").get<double>();
  c.trace_multiplier = j.at("trace_multiplier").get<double>();
  c.price.usd_per_hour = optional_from(j.at("price"));
  c.price.source = j.at("price_source").get<std::string>();
  c.diagnosis = diagnosis_from(j.at("diagnosis"));
  c.not_probed = j.at("not_probed").get<bool>();
  c.search.found = j.at("found").get<bool>();
  c.search.max_ok = j.at("max_ok").get<double>();
  c.search.min_fail = j.at("min_fail").get<double>();
  c.search.num_probes = j.at("n").get<int32_t>();
  c.max_rate_per_s = j.at("max_rate").get<double>();
  c.fail_rate_per_s = j.at("fail_rate").get<double>();
  c.probes.clear();
  for (const auto& p : j.at("probes")) {
    sim::study::RateProbe probe;
    probe.multiplier = p.at(0).get<double>();
    probe.rate_per_s = p.at(1).get<double>();
    probe.verdict.meets = p.at(2).get<bool>();
    probe.verdict.num_met = p.at(3).get<int64_t>();
    probe.verdict.num_decided = p.at(4).get<int64_t>();
    probe.verdict.attainment = p.at(5).get<double>();
    probe.verdict.reason = p.at(6).get<std::string>();
    probe.input_tokens_per_s = optional_from(p.at(7));
    probe.output_tokens_per_s = optional_from(p.at(8));
    probe.ttft_p99_ms = optional_from(p.at(9));
    probe.tpot_p99_ms = optional_from(p.at(10));
    c.probes.push_back(std::move(probe));
  }
}

int run_search_command(const std::vector<std::string>& argv, const MpiWorld& world) {
  Args args(argv, {"--slo", "--grid", "--target-rate", "--min-attainment", "--seed", "--tolerance",
                   "--max-doublings", "--threads", "--journal", "--gpu-price-per-hour", "--plan"});
  if (args.help_requested()) {
    if (world.rank() == 0) std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& path = args.positional(0, "SCENARIO");
  auto slo_text = args.value("--slo");
  auto grid = args.value("--grid");
  auto target = args.double_value("--target-rate");
  auto min_attainment = args.double_value("--min-attainment");
  auto seed = args.int_value("--seed");
  auto tolerance = args.double_value("--tolerance");
  auto doublings = args.int_value("--max-doublings");
  auto threads = args.int_value("--threads");
  Progress bar = world.rank() == 0
                     ? Progress::for_stderr("search", "configurations", args.flag("--progress"))
                     : Progress("search", "configurations", false, false);
  bool json = args.flag("--json");
  auto journal_path = args.value("--journal");
  const bool resume = args.flag("--resume");
  const bool probe_infeasible = args.flag("--probe-infeasible");
  const bool full_probes = args.flag("--full-probes");
  const std::optional<double> price = gpu_price_option(args);
  const std::optional<std::string> plan_path =
      world.rank() == 0 ? plan_option(args) : args.value("--plan");
  args.finish(1);
  if (resume && !journal_path) throw UsageError{"--resume needs --journal FILE"};
  if (journal_path && world.active()) {
    throw UsageError{"--journal cannot be combined with mpirun"};
  }
  if (!slo_text) throw UsageError{"--slo is required"};
  if (target && !(*target > 0)) throw UsageError{"--target-rate must be > 0"};
  if (min_attainment && !(*min_attainment >= 0 && *min_attainment <= 1)) {
    throw UsageError{"--min-attainment must be in [0, 1]"};
  }
  if (seed && *seed < 0) throw UsageError{"--seed must be >= 0"};
  if (tolerance && !(*tolerance > 0 && *tolerance <= 1)) {
    throw UsageError{"--tolerance must be in (0, 1]"};
  }
  if (doublings && (*doublings < 0 || *doublings > 30)) {
    throw UsageError{"--max-doublings must be in 0..30"};
  }
  if (threads && (*threads < 1 || *threads > 4096))
    throw UsageError{"--threads must be in 1..4096"};

  sim::study::SearchSlo slo = sim::study::parse_search_slo(*slo_text);
  if (min_attainment) slo.min_attainment = *min_attainment;
  sim::study::ScenarioTemplate scenario = sim::study::ScenarioTemplate::load(path);
  std::vector<std::vector<sim::study::Override>> configs(1);
  std::vector<std::string> parameter_keys;
  if (grid) {
    sim::study::SweepSpec spec = sim::study::load_sweep(*grid, path);
    sim::study::check_sweep(spec, scenario);
    configs = sim::study::grid_configs(spec);
    for (const auto& p : spec.parameters) parameter_keys.push_back(p.key_path);
  } else {
    scenario.instantiate({});
  }
  sim::study::SearchOptions opt;
  if (seed) opt.seed = static_cast<uint64_t>(*seed);
  if (tolerance) opt.rel_tolerance = *tolerance;
  if (doublings) opt.max_doublings = static_cast<int32_t>(*doublings);
  opt.num_threads = threads ? static_cast<int32_t>(*threads) : sim::study::default_num_threads();
  opt.target_rate_per_s = target;
  opt.probe_infeasible = probe_infeasible;
  opt.full_probes = full_probes;
  opt.gpu_price_per_hour = price;
  // Under mpirun rank r searches the configurations with config_idx % N == r; rank 0 gathers
  // them and prints what one process prints.
  opt.shard_index = world.rank();
  opt.shard_count = world.size();

  // The journal: a header naming the search, then one line per searched configuration (each
  // fsync'd); --resume takes the configurations it holds instead of searching them again.
  std::optional<sim::io::JournalFile> journal;
  std::vector<nlohmann::json> resumed;
  if (journal_path) {
    nlohmann::json header = {
        {"moesim_search_journal", 2},
        {"probe_infeasible", probe_infeasible},
        {"full_probes", full_probes},
        {"gpu_price_per_hour", price ? nlohmann::json(*price) : nlohmann::json(nullptr)},
        {"scenario", path},
        {"slo", *slo_text},
        {"grid", grid ? *grid : ""},
        {"min_attainment", slo.min_attainment},
        {"seed", seed ? nlohmann::json(*seed) : nlohmann::json(nullptr)},
        {"tolerance", opt.rel_tolerance},
        {"max_doublings", opt.max_doublings},
        {"num_configs", configs.size()}};
    const std::string header_line = header.dump() + "\n";
    sim::io::check_output_file(*journal_path, "--journal");
    int64_t keep_bytes = 0;
    if (resume) {
      std::ifstream in(*journal_path, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      if (!text.empty() && text.compare(0, header_line.size(), header_line) != 0) {
        throw sim::ConfigError(*journal_path, 1, 0, "",
                               "the journal of another search (its header differs)");
      }
      size_t at = text.size() >= header_line.size() ? header_line.size() : 0;
      int line = 1;
      opt.already_done.assign(configs.size(), false);
      while (at > 0 && at < text.size()) {
        const size_t end = text.find('\n', at);
        if (end == std::string::npos) break;  // cut short by a kill
        ++line;
        nlohmann::json j;
        try {
          j = parse_json(text.substr(at, end - at), false);
        } catch (const JsonDepthError& e) {
          throw sim::ConfigError(*journal_path, line, 0, "", e.what());
        }
        if (j.is_discarded() || !j.is_object() || !j.contains("idx") ||
            !j["idx"].is_number_unsigned() || j["idx"].get<size_t>() >= configs.size()) {
          throw sim::ConfigError(*journal_path, line, 0, "", "not a searched configuration");
        }
        opt.already_done[j["idx"].get<size_t>()] = true;
        resumed.push_back(std::move(j));
        at = end + 1;
      }
      keep_bytes = resumed.empty() ? 0 : static_cast<int64_t>(at);
    }
    journal.emplace(*journal_path, keep_bytes, "--journal");
    if (keep_bytes == 0) journal->stream() << header_line << std::flush;
    opt.on_searched = [&](const sim::study::ConfigSearch& c) {
      journal->stream() << searched_json(c).dump() << "\n" << std::flush;
    };
  }

  sim::study::SearchResult r =
      sim::study::search_rates(scenario, configs, slo, opt, bar.callback());
  if (journal) {
    if (!journal->stream()) throw sim::io::OutputError("cannot write " + *journal_path);
    for (const nlohmann::json& j : resumed) read_searched(j, r.configs.at(j["idx"].get<size_t>()));
    if (!resumed.empty()) {
      std::fprintf(stderr, "search: resumed %zu configurations from %s\n", resumed.size(),
                   journal_path->c_str());
    }
    if (target) r.cheapest = sim::study::cheapest_config(r.configs, *target);
  }
  if (world.active()) {
    nlohmann::json mine = nlohmann::json::array();
    for (const auto& c : r.configs) {
      if (c.config_idx % world.size() == world.rank()) mine.push_back(searched_json(c));
    }
    const std::vector<std::string> parts = world.gather_to_root(mine.dump());
    if (world.rank() != 0) return 0;
    for (const std::string& part : parts) {
      for (const auto& j : nlohmann::json::parse(part)) {
        read_searched(j, r.configs.at(j.at("idx").get<size_t>()));
      }
    }
    if (target) r.cheapest = sim::study::cheapest_config(r.configs, *target);
  }

  const sim::study::Plan plan = sim::study::search_plan(r, parameter_keys, slo, target);
  if (plan_path) write_plan_file(plan, *plan_path);
  const bool usd = sim::study::cost_axis_is_usd(plan.entries);
  auto number = [](const std::optional<double>& v) {
    return v ? nlohmann::json(sim::clean_double(*v)) : nlohmann::json(nullptr);
  };

  if (json) {
    nlohmann::json j;
    j["scenario"] = path;
    j["slo"]["min_attainment"] = slo.min_attainment;
    for (const auto& l : slo.percentile_limits) j["slo"][l.name] = l.limit_ms;
    if (slo.request_ttft_ms) j["slo"]["ttft_ms"] = *slo.request_ttft_ms;
    if (slo.request_tpot_ms) j["slo"]["tpot_ms"] = *slo.request_tpot_ms;
    j["configs"] = nlohmann::json::array();
    j["feasible"] = nlohmann::json::array();
    j["pareto"] = nlohmann::json::array();
    for (size_t i = 0; i < r.configs.size(); ++i) {
      const auto& c = r.configs[i];
      const sim::study::PlanEntry& e = plan.entries[i];
      nlohmann::json cj;
      cj["config_idx"] = c.config_idx;
      for (const auto& o : c.overrides) {
        cj["parameters"][o.key_path] = sim::study::override_value_text(o.value);
      }
      if (!c.error.empty()) {
        cj["error"] = c.error;
      } else {
        cj["num_gpus"] = c.num_gpus;
        cj["rate_unit"] = c.rate_unit;
        cj["base_rate_per_s"] = c.base_rate_per_s;
        const bool trace = c.trace_rate_per_s > 0;
        cj["trace_rate_per_s"] =
            trace ? nlohmann::json(sim::clean_double(c.trace_rate_per_s)) : nlohmann::json(nullptr);
        // null where there is no such rate: none met, or none failed.
        auto rate = [](double v, bool has) {
          return has ? nlohmann::json(sim::clean_double(v)) : nlohmann::json(nullptr);
        };
        const bool failed = c.search.min_fail > 0;
        cj["infeasible"] = c.diagnosis.infeasible();
        cj["not_probed"] = c.not_probed;
        cj["diagnosis"] = nullptr;
        if (c.diagnosis.done) cj["diagnosis"] = diagnosis_report_json(c.diagnosis);
        cj["found"] = c.search.found;
        cj["max_multiplier"] = rate(c.search.max_ok, c.search.found);
        cj["max_trace_multiplier"] =
            rate(c.search.max_ok * c.trace_multiplier, c.search.found && trace);
        cj["max_rate_per_s"] = rate(c.max_rate_per_s, c.search.found);
        cj["first_failing_multiplier"] = rate(c.search.min_fail, failed);
        cj["first_failing_rate_per_s"] = rate(c.fail_rate_per_s, failed);
        cj["input_tokens_per_s"] = number(e.input_tokens_per_s);
        cj["output_tokens_per_s"] = number(e.output_tokens_per_s);
        cj["input_tokens_per_s_per_gpu"] = number(e.cost.input_tokens_per_s_per_gpu);
        cj["output_tokens_per_s_per_gpu"] = number(e.cost.output_tokens_per_s_per_gpu);
        cj["gpu_price_per_hour"] = number(c.price.usd_per_hour);
        cj["gpu_hours_per_m_input_tokens"] = number(e.cost.gpu_hours_per_m_input_tokens);
        cj["gpu_hours_per_m_output_tokens"] = number(e.cost.gpu_hours_per_m_output_tokens);
        cj["usd_per_m_input_tokens"] = number(e.cost.usd_per_m_input_tokens);
        cj["usd_per_m_output_tokens"] = number(e.cost.usd_per_m_output_tokens);
        cj["probes"] = nlohmann::json::array();
        for (const auto& p : c.probes) {
          cj["probes"].push_back(
              {{"multiplier", sim::clean_double(p.multiplier)},
               {"rate_per_s", sim::clean_double(p.rate_per_s)},
               {"meets", p.verdict.meets},
               {"attainment", rate(p.verdict.attainment, p.verdict.num_decided > 0)},
               {"num_met", p.verdict.num_met},
               {"num_decided", p.verdict.num_decided},
               {"reason", p.verdict.reason},
               {"output_tokens_per_s", number(p.output_tokens_per_s)},
               {"ttft_p99_ms", number(p.ttft_p99_ms)},
               {"tpot_p99_ms", number(p.tpot_p99_ms)}});
        }
      }
      cj["feasible"] = e.feasible;
      cj["infeasible_reason"] = e.infeasible_reason;
      cj["pareto"] = e.pareto;
      if (e.feasible) j["feasible"].push_back(c.config_idx);
      if (e.pareto) j["pareto"].push_back(c.config_idx);
      j["configs"].push_back(cj);
    }
    if (target) j["target_rate_per_s"] = *target;
    if (r.cheapest) j["cheapest_config_idx"] = r.configs[*r.cheapest].config_idx;
    j["cost_axis"] = usd ? "usd_per_m_output_tokens" : "gpu_hours_per_m_output_tokens";
    j["cheapest_rule"] = plan.cheapest_rule;
    j["cheapest_feasible_config_idx"] =
        plan.cheapest ? nlohmann::json(plan.entries[*plan.cheapest].config_idx)
                      : nlohmann::json(nullptr);
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  std::printf("search %s\n  SLO:", path.c_str());
  for (const auto& l : slo.percentile_limits) std::printf(" %s <= %g,", l.name.c_str(), l.limit_ms);
  std::printf(" attainment >= %g", slo.min_attainment);
  if (slo.request_ttft_ms) std::printf(", per-request ttft <= %g ms", *slo.request_ttft_ms);
  if (slo.request_tpot_ms) std::printf(", per-request tpot <= %g ms", *slo.request_tpot_ms);
  std::printf("\n");
  const sim::study::ConfigSearch* first = nullptr;
  bool any_trace = false;
  for (const auto& c : r.configs) {
    if (!c.error.empty()) continue;
    if (!first) first = &c;
    any_trace = any_trace || c.trace_rate_per_s > 0;
  }
  const std::string unit = first ? first->rate_unit : "req/s";
  // The rate multipliers against the workload's own rate (a trace's real rate).
  if (first && first->trace_rate_per_s > 0) {
    std::printf(
        "  rate: x base 1 = %.4g %s = %g x the trace's real rate of %.4g req/s (its mean over "
        "the replay window)\n",
        first->base_rate_per_s, unit.c_str(), first->trace_multiplier, first->trace_rate_per_s);
  } else if (first) {
    std::printf("  rate: x base 1 = %.4g %s (the workload's arrival.rate_per_s)\n",
                first->base_rate_per_s, unit.c_str());
  }

  // The diagnosis: what no rate can fix.
  int64_t num_infeasible = 0, num_noted = 0;
  for (const auto& c : r.configs) {
    if (!c.diagnosis.done || c.diagnosis.findings.empty()) continue;
    if (num_noted++ == 0) {
      std::printf(
          "\n  diagnosis (before the probes; each request alone on an idle replica, the step "
          "model's lower bounds):\n");
    }
    num_infeasible += c.diagnosis.infeasible() ? 1 : 0;
    std::printf("  config %lld:%s\n", static_cast<long long>(c.config_idx),
                c.diagnosis.infeasible() ? " INFEASIBLE AT ANY RATE" : "");
    std::fputs(diagnosis_findings_text(c.diagnosis, "    ").c_str(), stdout);
  }
  if (num_noted == 0 && first && first->diagnosis.done) {
    std::printf(
        "\n  diagnosis: no request is beyond a limit on its own (isolated prefill, decode, KV "
        "fit) in any configuration\n");
  }

  const char* cost_head = usd ? "$/M out" : "GPU-h/M out";
  std::printf("\n  %-6s %-5s %12s %8s", "config", "gpus", "max rate", "x base");
  if (any_trace) std::printf(" %8s", "x trace");
  std::printf("  %13s  %11s %14s  %s\n", "out tok/s/GPU", cost_head, "first failing",
              grid ? "parameters" : "");
  for (size_t i = 0; i < r.configs.size(); ++i) {
    const auto& c = r.configs[i];
    const sim::study::PlanEntry& e = plan.entries[i];
    if (!c.error.empty()) {
      std::printf("  %-6lld error: %s  (%s)\n", static_cast<long long>(c.config_idx),
                  c.error.c_str(), config_text(c).c_str());
      continue;
    }
    if (c.not_probed) {
      std::printf("  %-6lld %-5lld infeasible at any rate (not probed; see the diagnosis)  %s\n",
                  static_cast<long long>(c.config_idx), static_cast<long long>(c.num_gpus),
                  grid ? config_text(c).c_str() : "");
      continue;
    }
    // "-" where there is no such rate (none met, or none failed), never a 0.
    auto g4 = [](const std::optional<double>& v) {
      char buf[32] = "-";
      if (v) std::snprintf(buf, sizeof(buf), "%.4g", *v);
      return std::string(buf);
    };
    const bool found = c.search.found;
    const auto opt = [](bool has, double v) {
      return has ? std::optional<double>(v) : std::nullopt;
    };
    std::printf("  %-6lld %-5lld %12s %8s", static_cast<long long>(c.config_idx),
                static_cast<long long>(c.num_gpus), g4(opt(found, c.max_rate_per_s)).c_str(),
                g4(opt(found, c.search.max_ok)).c_str());
    if (any_trace) {
      std::printf(
          " %8s",
          g4(opt(found && c.trace_rate_per_s > 0, c.search.max_ok * c.trace_multiplier)).c_str());
    }
    std::printf("  %13s  %11s %14s  %s\n", g4(e.cost.output_tokens_per_s_per_gpu).c_str(),
                g4(sim::study::cost_on_axis(e, usd)).c_str(),
                g4(opt(c.search.min_fail > 0, c.fail_rate_per_s)).c_str(),
                grid ? config_text(c).c_str() : "");
    if (!found) {
      std::printf("         meets the SLOs at no probed rate (lowest probed: %s)\n",
                  c.probes.empty() ? "-" : c.probes.back().verdict.reason.c_str());
    } else if (c.search.min_fail == 0) {
      std::printf("         meets the SLOs at every probed rate (a lower bound)\n");
    }
    if (c.diagnosis.infeasible()) {
      std::printf(
          "         (probed with --probe-infeasible: the diagnosis says no rate meets the "
          "SLOs)\n");
    }
  }
  std::printf(
      "\n  rates in %s; x base: the multiplier on the configuration's own rate;%s first failing:\n"
      "  the lowest probed rate above the max that broke the SLOs; per GPU and cost at the max "
      "rate\n",
      unit.c_str(), any_trace ? " x trace: on the trace's real rate;" : "");
  if (num_infeasible > 0) {
    std::printf("  %lld of %zu configurations infeasible at any rate%s\n",
                static_cast<long long>(num_infeasible), r.configs.size(),
                probe_infeasible ? "" : " (not probed; --probe-infeasible probes them)");
  }
  std::printf("%s", sim::study::plan_summary_text(plan).c_str());
  if (plan_path) std::printf("  plan -> %s\n", plan_path->c_str());
  if (target) {
    if (r.cheapest) {
      const auto& c = r.configs[*r.cheapest];
      std::printf("  cheapest sustaining %g/s: config %lld (%s), %lld GPUs, max %.4g/s\n", *target,
                  static_cast<long long>(c.config_idx), config_text(c).c_str(),
                  static_cast<long long>(c.num_gpus), c.max_rate_per_s);
    } else {
      std::printf("  no configuration sustains %g/s\n", *target);
    }
  }
  return 0;
}

}  // namespace

int search_command(const std::vector<std::string>& argv) {
  const MpiWorld world;
  if (!world.active()) return run_search_command(argv, world);
  // A rank that fails on its own ends the whole job (the others would wait in the gather).
  auto fail = [&](const std::string& message, int code) {
    std::fprintf(stderr, "moesim search (rank %d of %d): %s\n", world.rank(), world.size(),
                 message.c_str());
    world.abort(code);
  };
  int code = 0;
  try {
    code = run_search_command(argv, world);
  } catch (const sim::ConfigError& e) {
    fail(std::string("error: ") + e.what(), sim::kExitBadInput);
  } catch (const sim::io::OutputError& e) {
    fail(std::string("error: ") + e.what(), sim::io::kExitOutputFailed);
  } catch (const UsageError& e) {
    fail(e.message + " (see moesim search --help)", sim::kExitBadInput);
  }
  return static_cast<int>(world.max(code));
}

}  // namespace moesim::cli

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
#include "apps/moesim/mpi_world.h"
#include "sim/config/config_error.h"
#include "sim/core/json_depth.h"
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
    "                     [--threads N] [--journal FILE [--resume]] [--progress] [--json]\n\n"
    "Finds, for each configuration, the highest rate at which SCENARIO meets the SLOs, by scaling\n"
    "the workload's rate (arrival.rate_per_s, or rate_multiplier for traces) with a multiplier:\n"
    "1, then doubling or halving, then geometric bisection. Assumes that meeting the SLOs is\n"
    "monotone in the rate.\n"
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
    "  --threads N         configurations searched in parallel (default: hardware threads)\n"
    "  --journal FILE      record each searched configuration in FILE as it completes (fsync'd)\n"
    "  --resume            take the configurations FILE holds (a killed search) instead of\n"
    "                      searching them again; the output is an uninterrupted run's\n"
    "  --progress          progress bar on stderr even when it is not a terminal\n"
    "  --json              print every probe as one JSON document\n"
    "under mpirun -np N: rank r searches configurations r, r+N, ...; rank 0 prints the result.\n"
    "exit codes: 0 success, 2 bad input\n";

void draw_progress(int64_t done, int64_t total) {
  std::fprintf(stderr, "\rsearch: %lld/%lld configurations", static_cast<long long>(done),
               static_cast<long long>(total));
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

std::string config_text(const sim::study::ConfigSearch& c) {
  return sim::study::overrides_text(c.overrides);
}

// What an MPI rank sends rank 0 of a configuration it searched (the overrides rank 0 has), in
// JSON, whose numbers read back to the same doubles.
nlohmann::json searched_json(const sim::study::ConfigSearch& c) {
  nlohmann::json probes = nlohmann::json::array();
  for (const auto& p : c.probes) {
    probes.push_back({p.multiplier, p.rate_per_s, p.verdict.meets, p.verdict.num_met,
                      p.verdict.num_decided, p.verdict.attainment, p.verdict.reason});
  }
  return {{"idx", c.config_idx},
          {"error", c.error},
          {"gpus", c.num_gpus},
          {"unit", c.rate_unit},
          {"base", c.base_rate_per_s},
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
    c.probes.push_back(std::move(probe));
  }
}

int run_search_command(const std::vector<std::string>& argv, const MpiWorld& world) {
  Args args(argv, {"--slo", "--grid", "--target-rate", "--min-attainment", "--seed", "--tolerance",
                   "--max-doublings", "--threads", "--journal"});
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
  bool progress = (args.flag("--progress") || isatty(fileno(stderr))) && world.rank() == 0;
  bool json = args.flag("--json");
  auto journal_path = args.value("--journal");
  const bool resume = args.flag("--resume");
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
  // Under mpirun rank r searches the configurations with config_idx % N == r; rank 0 gathers
  // them and prints what one process prints.
  opt.shard_index = world.rank();
  opt.shard_count = world.size();

  // The journal: a header naming the search, then one line per searched configuration (each
  // fsync'd); --resume takes the configurations it holds instead of searching them again.
  std::optional<sim::io::JournalFile> journal;
  std::vector<nlohmann::json> resumed;
  if (journal_path) {
    nlohmann::json header = {{"moesim_search_journal", 1},
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

  sim::study::SearchResult r = sim::study::search_rates(
      scenario, configs, slo, opt,
      progress ? std::function<void(int64_t, int64_t)>(draw_progress) : nullptr);
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

  if (json) {
    nlohmann::json j;
    j["scenario"] = path;
    j["slo"]["min_attainment"] = slo.min_attainment;
    for (const auto& l : slo.percentile_limits) j["slo"][l.name] = l.limit_ms;
    if (slo.request_ttft_ms) j["slo"]["ttft_ms"] = *slo.request_ttft_ms;
    if (slo.request_tpot_ms) j["slo"]["tpot_ms"] = *slo.request_tpot_ms;
    j["configs"] = nlohmann::json::array();
    for (const auto& c : r.configs) {
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
        // null where there is no such rate: none met, or none failed.
        auto rate = [](double v, bool has) {
          return has ? nlohmann::json(sim::clean_double(v)) : nlohmann::json(nullptr);
        };
        const bool failed = c.search.min_fail > 0;
        cj["found"] = c.search.found;
        cj["max_multiplier"] = rate(c.search.max_ok, c.search.found);
        cj["max_rate_per_s"] = rate(c.max_rate_per_s, c.search.found);
        cj["first_failing_multiplier"] = rate(c.search.min_fail, failed);
        cj["first_failing_rate_per_s"] = rate(c.fail_rate_per_s, failed);
        cj["probes"] = nlohmann::json::array();
        for (const auto& p : c.probes) {
          cj["probes"].push_back(
              {{"multiplier", sim::clean_double(p.multiplier)},
               {"rate_per_s", sim::clean_double(p.rate_per_s)},
               {"meets", p.verdict.meets},
               {"attainment", rate(p.verdict.attainment, p.verdict.num_decided > 0)},
               {"num_met", p.verdict.num_met},
               {"num_decided", p.verdict.num_decided},
               {"reason", p.verdict.reason}});
        }
      }
      j["configs"].push_back(cj);
    }
    if (target) j["target_rate_per_s"] = *target;
    if (r.cheapest) j["cheapest_config_idx"] = r.configs[*r.cheapest].config_idx;
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  std::printf("search %s\n  SLO:", path.c_str());
  for (const auto& l : slo.percentile_limits) std::printf(" %s <= %g,", l.name.c_str(), l.limit_ms);
  std::printf(" attainment >= %g", slo.min_attainment);
  if (slo.request_ttft_ms) std::printf(", per-request ttft <= %g ms", *slo.request_ttft_ms);
  if (slo.request_tpot_ms) std::printf(", per-request tpot <= %g ms", *slo.request_tpot_ms);
  const std::string unit = r.configs.empty() || r.configs.front().rate_unit.empty()
                               ? "req/s"
                               : r.configs.front().rate_unit;
  std::printf("\n\n  %-6s %-5s %12s %8s %14s  %s\n", "config", "gpus", "max rate", "x base",
              "first failing", grid ? "parameters" : "");
  for (const auto& c : r.configs) {
    if (!c.error.empty()) {
      std::printf("  %-6lld error: %s  (%s)\n", static_cast<long long>(c.config_idx),
                  c.error.c_str(), config_text(c).c_str());
      continue;
    }
    // "-" where there is no such rate (none met, or none failed), never a 0.
    char fail[32] = "-", max_rate[32] = "-", max_x[32] = "-";
    if (c.search.min_fail > 0) std::snprintf(fail, sizeof(fail), "%.4g", c.fail_rate_per_s);
    if (c.search.found) {
      std::snprintf(max_rate, sizeof(max_rate), "%.4g", c.max_rate_per_s);
      std::snprintf(max_x, sizeof(max_x), "%.4g", c.search.max_ok);
    }
    std::printf("  %-6lld %-5lld %12s %8s %14s  %s\n", static_cast<long long>(c.config_idx),
                static_cast<long long>(c.num_gpus), max_rate, max_x, fail,
                grid ? config_text(c).c_str() : "");
    if (!c.search.found) {
      std::printf("         meets the SLOs at no probed rate (lowest probed: %s)\n",
                  c.probes.empty() ? "-" : c.probes.back().verdict.reason.c_str());
    } else if (c.search.min_fail == 0) {
      std::printf("         meets the SLOs at every probed rate (a lower bound)\n");
    }
  }
  std::printf(
      "\n  rates in %s; x base: the multiplier on the configuration's own rate; first "
      "failing:\n  the lowest probed rate above the max that broke the SLOs\n",
      unit.c_str());
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

// `moesim compare A.toml B.toml`: runs both scenarios with the same seeds (common random
// numbers) and prints the paired differences B - A with bootstrap confidence intervals
// (sim/study/compare.h explains the two resampling methods).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/moesim/cli.h"
#include "apps/moesim/progress.h"
#include "sim/metrics/figure_text.h"
#include "sim/policy/policy_registry.h"
#include "sim/study/compare.h"
#include "sim/study/overrides.h"
#include "sim/study/parallel_runs.h"

namespace moesim::cli {
namespace {

constexpr const char* kUsage =
    "usage: moesim compare A.toml B.toml [--seed N] [--replications N] [--resamples N]\n"
    "                      [--confidence C] [--duration SECONDS] [--threads N] [--json]\n"
    "                      [--set-a KEY.PATH=VALUE]... [--set-b KEY.PATH=VALUE]...\n"
    "                      [--drop-a KEY.PATH]... [--drop-b KEY.PATH]... [--progress]\n\n"
    "Runs A and B with the same root seed (common random numbers) and prints A, B, B - A and\n"
    "B/A - 1 with units for TTFT/TPOT p50/p99, throughput, goodput, SLO attainment and policy\n"
    "action counts, with percentile-bootstrap confidence intervals of B - A.\n"
    "  --seed N           root seed (default: A's [run] seed)\n"
    "  --replications N   1 (default): one run each, resample matched requests;\n"
    "                     N >= 2: seeds seed..seed+N-1, resample replications (sound under\n"
    "                     queueing correlation; prefer N >= 10)\n"
    "  --resamples N      bootstrap resamples (default 1000)\n"
    "  --confidence C     interval level in (0, 1) (default 0.95)\n"
    "  --duration SECONDS simulated time of both (default: each scenario's [run] duration_s)\n"
    "  --threads N        runs in parallel (default: the machine's hardware threads)\n"
    "  --set-a, --set-b KEY.PATH=VALUE\n"
    "                     override a key of A or B (repeatable; as moesim run --set)\n"
    "  --drop-a, --drop-b KEY.PATH\n"
    "                     remove a key or table from A or B (repeatable), e.g. the policy\n"
    "                     under study: moesim compare S.toml S.toml --drop-a policies\n"
    "  --json             print the comparison as one JSON document\n"
    "  --progress         runs done and time left on stderr even when it is not a terminal\n"
    "exit codes: 0 success, 1 a run broke conservation, 2 bad input\n";

// "without policies; scheduler.max_seqs=64": what --drop-X and --set-X did to a side, "" if
// nothing.
std::string changes_text(const std::vector<std::string>& dropped,
                         const std::vector<sim::study::Override>& overrides) {
  std::string out;
  for (const std::string& d : dropped) out += (out.empty() ? "without " : ", without ") + d;
  if (!overrides.empty()) out += (out.empty() ? "" : "; ") + sim::study::overrides_text(overrides);
  return out;
}
std::string with_changes(const std::vector<std::string>& dropped,
                         const std::vector<sim::study::Override>& overrides) {
  const std::string c = changes_text(dropped, overrides);
  return c.empty() ? "" : " (" + c + ")";
}

// A figure, null where there is no data (NaN, sim/study/compare.h).
nlohmann::json figure_json(double v) {
  return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(sim::clean_double(v));
}

// a and b are null on a difference-only row (they are not figures of the runs).
nlohmann::json metric_json(const sim::study::MetricComparison& m) {
  nlohmann::json j = {
      {"metric", m.metric},
      {"unit", m.unit},
      {"a", m.difference_only ? nlohmann::json(nullptr) : figure_json(m.a)},
      {"b", m.difference_only ? nlohmann::json(nullptr) : figure_json(m.b)},
      {"diff", figure_json(m.diff)},
      {"rel_diff", m.difference_only ? nlohmann::json(nullptr) : figure_json(m.rel_diff)}};
  if (m.has_ci) j["ci"] = {figure_json(m.ci_lo), figure_json(m.ci_hi)};
  return j;
}

// "%.5g" of v (with a sign when `sign`), "n/a" for no data.
std::string cell(double v, bool sign = false) {
  if (std::isnan(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof(buf), sign ? "%+.5g" : "%.5g", v);
  return buf;
}

// One row: metric, unit, A, B, B - A, (B - A) / |A| in %, interval. A difference-only row shows
// its difference and interval only.
void print_metric(const sim::study::MetricComparison& m) {
  std::string rel = "n/a";
  if (!std::isnan(m.rel_diff)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%+.2f%%", 100 * m.rel_diff);
    rel = buf;
  }
  const bool d = m.difference_only;
  std::printf("  %-26s %-10s %12s %12s %12s %9s", m.metric.c_str(), m.unit.c_str(),
              d ? "-" : cell(m.a).c_str(), d ? "-" : cell(m.b).c_str(), cell(m.diff, true).c_str(),
              d ? "-" : rel.c_str());
  if (m.has_ci) {
    std::printf("   [%s, %s]%s\n", cell(m.ci_lo, true).c_str(), cell(m.ci_hi, true).c_str(),
                m.ci_lo > 0 || m.ci_hi < 0 ? " *" : "");
  } else {
    std::printf("   n/a\n");
  }
}

}  // namespace

int compare_command(const std::vector<std::string>& argv) {
  Args args(argv,
            {"--seed", "--replications", "--resamples", "--confidence", "--duration", "--threads",
             "--set-a", "--set-b", "--drop-a", "--drop-b"},
            {"--set-a", "--set-b", "--drop-a", "--drop-b"});
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string& path_a = args.positional(0, "A.toml");
  const std::string& path_b = args.positional(1, "B.toml");
  auto seed = args.int_value("--seed");
  auto reps = args.int_value("--replications");
  auto resamples = args.int_value("--resamples");
  auto confidence = args.double_value("--confidence");
  auto duration = args.double_value("--duration");
  auto threads = args.int_value("--threads");
  bool json = args.flag("--json");
  std::vector<sim::study::Override> set_a, set_b;
  for (const std::string& s : args.values("--set-a")) {
    set_a.push_back(sim::study::parse_override(s, "--set-a"));
  }
  for (const std::string& s : args.values("--set-b")) {
    set_b.push_back(sim::study::parse_override(s, "--set-b"));
  }
  const std::vector<std::string> drop_a = args.values("--drop-a");
  const std::vector<std::string> drop_b = args.values("--drop-b");
  Progress bar = Progress::for_stderr("compare", "runs", args.flag("--progress"));
  args.finish(2);
  if (seed && *seed < 0) throw UsageError{"--seed must be >= 0"};
  if (reps && (*reps < 1 || *reps > 100000))
    throw UsageError{"--replications must be in 1..100000"};
  if (resamples && (*resamples < 1 || *resamples > 10000000)) {
    throw UsageError{"--resamples must be in 1..10000000"};
  }
  if (confidence && !(*confidence > 0 && *confidence < 1)) {
    throw UsageError{"--confidence must be in (0, 1)"};
  }
  // run.duration_s's range (also what keeps the run's end within the horizon).
  if (duration && !(*duration >= 1e-6 && *duration <= 1e7)) {
    throw UsageError{"--duration must be in [1e-6, 1e7] seconds (run.duration_s's range)"};
  }
  if (threads && (*threads < 1 || *threads > 4096))
    throw UsageError{"--threads must be in 1..4096"};

  // Each side: the file, less the dropped keys, with the overrides (policy settings resolved).
  sim::Scenario a = sim::study::ScenarioTemplate::load(path_a).without(drop_a).instantiate(set_a);
  sim::Scenario b = sim::study::ScenarioTemplate::load(path_b).without(drop_b).instantiate(set_b);
  if (duration) a.run.duration_s = b.run.duration_s = *duration;
  sim::study::CompareOptions opt;
  opt.seed = seed ? static_cast<uint64_t>(*seed) : a.run.seed;
  if (reps) opt.num_replications = static_cast<int32_t>(*reps);
  if (resamples) opt.num_resamples = static_cast<int32_t>(*resamples);
  if (confidence) opt.confidence = *confidence;
  opt.num_threads = threads ? static_cast<int32_t>(*threads) : sim::study::default_num_threads();

  opt.progress = bar.callback();
  sim::study::CompareResult r = sim::study::compare_scenarios(a, b, opt);
  if (json) {
    nlohmann::json j;
    j["a"] = path_a;
    j["b"] = path_b;
    j["changes"] = {{"a", changes_text(drop_a, set_a)}, {"b", changes_text(drop_b, set_b)}};
    j["method"] = r.method;
    j["seeds"] = r.seeds;
    j["resamples"] = opt.num_resamples;
    j["confidence"] = opt.confidence;
    if (r.method == "requests") {
      j["requests"] = {{"a", r.num_requests_a},
                       {"b", r.num_requests_b},
                       {"matched", r.num_matched},
                       {"identical_arrivals", r.num_identical}};
    }
    j["metrics"] = nlohmann::json::array();
    for (const auto& m : r.metrics) j["metrics"].push_back(metric_json(m));
    j["actions"] = nlohmann::json::array();
    for (const auto& m : r.actions) j["actions"].push_back(metric_json(m));
    j["mechanisms"] = nlohmann::json::array();
    for (const auto& m : r.mechanisms) j["mechanisms"].push_back(metric_json(m));
    j["digests"] = {{"a", r.digests_a}, {"b", r.digests_b}};
    j["conservation_ok"] = r.conservation_ok;
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("compare  A = %s%s\n         B = %s%s\n", path_a.c_str(),
                with_changes(drop_a, set_a).c_str(), path_b.c_str(),
                with_changes(drop_b, set_b).c_str());
    if (r.method == "requests") {
      std::printf(
          "seed %llu, common random numbers; %lld requests in A, %lld in B, %lld matched by id "
          "(%lld with identical arrivals)\n",
          static_cast<unsigned long long>(r.seeds.front()),
          static_cast<long long>(r.num_requests_a), static_cast<long long>(r.num_requests_b),
          static_cast<long long>(r.num_matched), static_cast<long long>(r.num_identical));
      std::printf("%.0f%% intervals: paired bootstrap over requests, %d resamples\n\n",
                  100 * opt.confidence, opt.num_resamples);
    } else {
      std::printf("seeds %llu..%llu (A and B share each seed)\n",
                  static_cast<unsigned long long>(r.seeds.front()),
                  static_cast<unsigned long long>(r.seeds.back()));
      std::printf(
          "%.0f%% intervals: bootstrap over %zu replications, %d resamples; A and B are "
          "means over replications\n\n",
          100 * opt.confidence, r.seeds.size(), opt.num_resamples);
    }
    std::printf("  %-26s %-10s %12s %12s %12s %9s   %s\n", "metric", "unit", "A", "B", "B - A",
                "B/A - 1", "interval of B - A");
    for (const auto& m : r.metrics) print_metric(m);
    if (!r.actions.empty()) {
      std::printf("\n  policy actions\n");
      for (const auto& m : r.actions) print_metric(m);
    }
    if (!r.mechanisms.empty()) {
      std::printf("\n  mechanisms (run totals)\n");
      for (const auto& m : r.mechanisms) print_metric(m);
    }
    std::printf(
        "\n  * the interval excludes 0; n/a: no data (e.g. TPOT when nothing completed), or no\n"
        "    interval; slo_attainment is met / decided requests (docs/outputs.md)\n");
    if (!r.conservation_ok) std::printf("  CONSERVATION BROKEN in at least one run\n");
  }
  return r.conservation_ok ? 0 : 1;
}

}  // namespace moesim::cli

#include "sim/study/sweep.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/study/csv.h"
#include "sim/study/sweep_merge.h"
#include "tests/support/config_errors.h"
#include "tests/support/scratch_files.h"

namespace moesim::sim::study {
namespace {

const std::string kDataDir = std::string(MOESIM_SOURCE_DIR) + "/tests/data/study";
const std::string kGrid = kDataDir + "/grid.toml";

// Writes `text` to a file in the test's temporary directory and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
  return scratch::write(name, text);
}

std::string sweep_text(const std::string& body) {
  return "scenario = \"" + kDataDir + "/tiny.toml\"\n" + body;
}

std::string load_error(const std::string& name, const std::string& text) {
  std::string path = write_temp(name, text);
  return testing::config_error_of([&] {
    SweepSpec spec = load_sweep(path);
    check_sweep(spec, ScenarioTemplate::load(spec.scenario_path));
  });
}

std::string run_to_string(const SweepSpec& spec, int32_t threads, Shard shard = {}) {
  ScenarioTemplate t = ScenarioTemplate::load(spec.scenario_path);
  std::ostringstream os;
  SweepOptions opt;
  opt.num_threads = threads;
  opt.shard = shard;
  run_sweep(spec, t, opt, os);
  return os.str();
}

std::vector<std::vector<std::string>> rows_of(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    EXPECT_TRUE(split_csv_line(line, cells));
    rows.push_back(cells);
  }
  return rows;
}

TEST(Sweep, LoadsTheFile) {
  SweepSpec spec = load_sweep(kGrid);
  EXPECT_EQ(spec.scenario_path, kDataDir + "/tiny.toml");
  ASSERT_EQ(spec.parameters.size(), 2u);
  EXPECT_EQ(spec.parameters[0].key_path, "scheduler.max_seqs");
  EXPECT_EQ(spec.parameters[0].line, 6);
  EXPECT_EQ(spec.parameters[0].value_lines, (std::vector<int32_t>{7, 7}));
  EXPECT_EQ(std::get<int64_t>(spec.parameters[1].values[1]), 2);
  EXPECT_EQ(spec.seeds, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(num_sweep_runs(spec), 8);
  check_sweep(spec, ScenarioTemplate::load(spec.scenario_path));
}

TEST(Sweep, GridOrderFirstParameterSlowest) {
  SweepSpec spec = load_sweep(kGrid);
  std::vector<std::vector<Override>> configs = grid_configs(spec);
  ASSERT_EQ(configs.size(), 4u);
  std::vector<std::string> texts;
  for (const auto& c : configs) texts.push_back(overrides_text(c));
  EXPECT_EQ(texts, (std::vector<std::string>{"scheduler.max_seqs=2, deployment.replicas=1",
                                             "scheduler.max_seqs=2, deployment.replicas=2",
                                             "scheduler.max_seqs=8, deployment.replicas=1",
                                             "scheduler.max_seqs=8, deployment.replicas=2"}));
  EXPECT_EQ(runs_per_config(spec), 2);
}

TEST(Sweep, MixedNumbersBecomeFloats) {
  std::string path = write_temp(
      "mixed.toml",
      sweep_text("[[parameters]]\nkey = \"workload.arrival.rate_per_s\"\nvalues = [10, 12.5]\n"));
  SweepSpec spec = load_sweep(path);
  EXPECT_DOUBLE_EQ(std::get<double>(spec.parameters[0].values[0]), 10.0);
  EXPECT_EQ(spec.num_replications, 1);
  EXPECT_TRUE(spec.seeds.empty());
}

TEST(Sweep, FileErrorsNameLineAndKey) {
  std::string err = load_error("e1.toml", sweep_text("seeds = [1]\nparameterz = 3\n"));
  EXPECT_NE(err.find("e1.toml:3:1: parameterz: unknown key 'parameterz' (did you mean "
                     "'parameters'?)"),
            std::string::npos)
      << err;
  err = load_error("e2.toml", sweep_text("[[parameters]]\nkey = \"scheduler.max_seqs\"\n"
                                         "values = []\n"));
  EXPECT_NE(err.find("e2.toml:4:10: parameters[0].values: expected a non-empty array"),
            std::string::npos)
      << err;
  err = load_error("e3.toml", sweep_text("[[parameters]]\nkey = \"scheduler.max_seqs\"\n"
                                         "values = [1, \"two\"]\n"));
  EXPECT_NE(err.find("all values must have one type"), std::string::npos) << err;
  err = load_error("e4.toml", sweep_text("seeds = [1, 1]\n"));
  EXPECT_NE(err.find("seed listed twice"), std::string::npos) << err;
  err = load_error("e5.toml", sweep_text("seeds = [1]\nreplications = 2\n"));
  EXPECT_NE(err.find("either seeds or replications"), std::string::npos) << err;
  err = load_error("e6.toml", sweep_text("[[parameters]]\nkey = \"a\"\nvalues = [1]\n"
                                         "[[parameters]]\nkey = \"a\"\nvalues = [2]\n"));
  EXPECT_NE(err.find("given twice"), std::string::npos) << err;
  err = load_error("e7.toml", "seeds = [1]\n");
  EXPECT_NE(err.find("scenario: missing required key"), std::string::npos) << err;
}

// Linked parameters advance in lockstep with the parameter they name: a dimension of 3 values
// and a linked pair of 2 give 2 x 3 configurations, not 2 x 3 x 3.
TEST(Sweep, LinkedParametersAdvanceTogether) {
  const std::string path = write_temp(
      "linked.toml", sweep_text("[[parameters]]\nkey = \"deployment.replicas\"\nvalues = [1, 2]\n"
                                "[[parameters]]\nkey = \"scheduler.max_seqs\"\nvalues = [2, 4, 8]\n"
                                "[[parameters]]\nkey = \"workload.arrival.rate_per_s\"\n"
                                "values = [10.0, 20.0]\nlinked_to = \"deployment.replicas\"\n"));
  const SweepSpec spec = load_sweep(path);
  EXPECT_EQ(spec.parameters[2].linked_to, 0u);
  EXPECT_EQ(num_grid_configs(spec), 6);
  EXPECT_EQ(num_sweep_runs(spec), 6);
  std::vector<std::string> texts;
  for (const auto& c : grid_configs(spec)) texts.push_back(overrides_text(c));
  const std::string r1 = ", workload.arrival.rate_per_s=10",
                    r2 = ", workload.arrival.rate_per_s=20";
  EXPECT_EQ(texts, (std::vector<std::string>{
                       "deployment.replicas=1, scheduler.max_seqs=2" + r1,
                       "deployment.replicas=1, scheduler.max_seqs=4" + r1,
                       "deployment.replicas=1, scheduler.max_seqs=8" + r1,
                       "deployment.replicas=2, scheduler.max_seqs=2" + r2,
                       "deployment.replicas=2, scheduler.max_seqs=4" + r2,
                       "deployment.replicas=2, scheduler.max_seqs=8" + r2,
                   }));
  check_sweep(spec, ScenarioTemplate::load(spec.scenario_path));
}

TEST(Sweep, LinkErrorsNameLineAndKey) {
  const std::string first = "[[parameters]]\nkey = \"deployment.replicas\"\nvalues = [1, 2]\n";
  std::string err = load_error(
      "l1.toml", sweep_text(first + "[[parameters]]\nkey = \"scheduler.max_seqs\"\n"
                                    "values = [2, 4, 8]\nlinked_to = \"deployment.replicas\"\n"));
  EXPECT_NE(err.find("l1.toml:7:10: parameters[1].values: 3 values where 'deployment.replicas', "
                     "which 'scheduler.max_seqs' is linked to, has 2: linked parameters advance "
                     "together and need as many values"),
            std::string::npos)
      << err;
  err = load_error("l2.toml",
                   sweep_text(first + "[[parameters]]\nkey = \"scheduler.max_seqs\"\n"
                                      "values = [2, 4]\nlinked_to = \"deployment.replicaz\"\n"));
  EXPECT_NE(err.find("l2.toml:8:13: parameters[1].linked_to: 'deployment.replicaz' is no earlier "
                     "parameter (earlier: deployment.replicas)"),
            std::string::npos)
      << err;
}

TEST(Sweep, UnknownKeyPathNamesTheSweepLine) {
  std::string err = load_error(
      "k1.toml", sweep_text("\n[[parameters]]\nkey = \"scheduler.max_seqz\"\nvalues = [2, 4]\n"));
  EXPECT_NE(err.find("k1.toml:5: parameters[0]: 'scheduler.max_seqz' = 2: "
                     "scheduler.max_seqz: unknown key 'max_seqz'"),
            std::string::npos)
      << err;
  err = load_error("k2.toml", sweep_text("[[parameters]]\nkey = \"scheduler.router\"\n"
                                         "values = [\"round_robin\",\n  \"fastest\"]\n"));
  EXPECT_NE(err.find("k2.toml:5: parameters[0]: 'scheduler.router' = fastest"), std::string::npos)
      << err;
  err = load_error("k3.toml", sweep_text("[[parameters]]\nkey = \"deployment.replicas\"\n"
                                         "values = [\"two\"]\n"));
  EXPECT_NE(err.find("expected an integer"), std::string::npos) << err;
}

TEST(Sweep, ShardParsing) {
  Shard s = parse_shard("2/3");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 3);
  EXPECT_TRUE(s.contains(1));
  EXPECT_TRUE(s.contains(4));
  EXPECT_FALSE(s.contains(0));
  for (const char* bad : {"0/3", "4/3", "3", "a/b", "1/", "/2", "-1/2"}) {
    EXPECT_THROW(parse_shard(bad), ConfigError) << bad;
  }
}

TEST(Sweep, CsvBytesDoNotDependOnThreads) {
  SweepSpec spec = load_sweep(kGrid);
  std::string one = run_to_string(spec, 1);
  std::string two = run_to_string(spec, 2);
  EXPECT_EQ(one, two);
  auto rows = rows_of(one);
  ASSERT_EQ(rows.size(), 9u);  // header + 8 runs
  EXPECT_EQ(rows[0][0], "run_idx");
  EXPECT_EQ(rows[0][4], "scheduler.max_seqs");
  EXPECT_EQ(rows[0][5], "deployment.replicas");
  EXPECT_EQ(rows[0][6], "status");
  for (size_t r = 1; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r].size(), rows[0].size());
    EXPECT_EQ(rows[r][0], std::to_string(r - 1));
    EXPECT_EQ(rows[r][1], "8");
    EXPECT_EQ(rows[r][2], std::to_string((r - 1) / 2));
    EXPECT_EQ(rows[r][3], (r - 1) % 2 == 0 ? "1" : "2");
    EXPECT_EQ(rows[r][6], "ok") << rows[r].back();
  }
  EXPECT_EQ(rows[3][4], "2");  // run 2: config 1 = (max_seqs 2, replicas 2)
  EXPECT_EQ(rows[3][5], "2");
  EXPECT_EQ(rows[3][7], "4");  // num_gpus = 2 replicas x 2
  // Same configuration, different seeds: different runs.
  EXPECT_NE(rows[1][rows[1].size() - 2], rows[2][rows[2].size() - 2]);  // digest
}

TEST(Sweep, ShardsMergeToTheUnshardedCsv) {
  SweepSpec spec = load_sweep(kGrid);
  std::string whole = run_to_string(spec, 2);
  std::vector<std::string> paths;
  for (int32_t k = 3; k >= 1; --k) {  // any file order
    std::string csv = run_to_string(spec, 1, Shard{k, 3});
    EXPECT_EQ(rows_of(csv).size(), 1u + (k == 3 ? 2u : 3u));
    paths.push_back(write_temp("shard" + std::to_string(k) + ".csv", csv));
  }
  std::ostringstream merged;
  merge_sweep_csvs(paths, merged);
  EXPECT_EQ(merged.str(), whole);
}

TEST(Sweep, InfeasibleCombinationsAreErrorRows) {
  // 4 replicas x 4 GPUs exceed the 8-GPU node; each value alone is fine.
  std::string path = write_temp(
      "infeasible.toml",
      sweep_text("[[parameters]]\nkey = \"deployment.replicas\"\nvalues = [1, 4]\n"
                 "[[parameters]]\nkey = \"deployment.gpus_per_replica\"\nvalues = [2, 4]\n"
                 "[[parameters]]\nkey = \"run.duration_s\"\nvalues = [0.2]\n"));
  SweepSpec spec = load_sweep(path);
  ScenarioTemplate t = ScenarioTemplate::load(spec.scenario_path);
  check_sweep(spec, t);
  std::ostringstream os;
  SweepStats stats = run_sweep(spec, t, SweepOptions{2, {}, {}}, os);
  EXPECT_EQ(stats.num_runs, 4);
  EXPECT_EQ(stats.num_errors, 1);
  auto rows = rows_of(os.str());
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[4][7], "error");
  EXPECT_NE(rows[4].back().find("exceed the topology's 8 GPUs"), std::string::npos)
      << rows[4].back();
  EXPECT_EQ(rows[4][3], "");  // the seed comes from the scenario, which did not parse
  EXPECT_EQ(rows[3][7], "ok");
  EXPECT_EQ(rows[3][3], "11");  // the scenario's [run] seed
}

// The cell of `column` in `row`, by the header's names.
std::string cell(const std::vector<std::vector<std::string>>& rows, size_t row,
                 const std::string& column) {
  for (size_t c = 0; c < rows[0].size(); ++c) {
    if (rows[0][c] == column) return rows[row][c];
  }
  ADD_FAILURE() << "no column " << column;
  return "";
}

// A run too short for a request to complete: the figures without samples are empty cells, not
// zeros; counts stay numbers. Figures have at most 15 significant digits.
TEST(Sweep, FiguresWithoutSamplesAreEmptyCells) {
  std::string path =
      write_temp("short.toml",
                 sweep_text("[[parameters]]\nkey = \"run.duration_s\"\nvalues = [0.0005, 1.0]\n"));
  auto rows = rows_of(run_to_string(load_sweep(path), 1));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(cell(rows, 1, "num_completed"), "0");
  for (const char* column : {"tpot_p50_ms", "tpot_p99_ms", "e2e_p50_ms", "e2e_p99_ms"}) {
    EXPECT_EQ(cell(rows, 1, column), "") << column;
  }
  EXPECT_EQ(cell(rows, 1, "num_slo_met"), "0");
  if (cell(rows, 1, "num_slo_decided") == "0") {
    EXPECT_EQ(cell(rows, 1, "slo_attainment"), "");
  }
  // The longer run completes requests: every figure is a number of at most 15 digits.
  EXPECT_NE(cell(rows, 2, "num_completed"), "0");
  for (const char* column : {"tpot_p50_ms", "e2e_p99_ms", "slo_attainment", "requests_per_s",
                             "output_tokens_per_s", "compute_fraction"}) {
    std::string v = cell(rows, 2, column);
    EXPECT_FALSE(v.empty()) << column;
    size_t significant = 0;
    bool leading = true;  // zeros before the first non-zero digit are not significant
    for (size_t i = 0; i < v.size() && v[i] != 'e'; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(v[i]))) continue;
      leading = leading && v[i] == '0';
      significant += !leading;
    }
    EXPECT_LE(significant, 15u) << column << " = " << v;
  }
  EXPECT_GE(std::stoll(cell(rows, 2, "num_slo_decided")), std::stoll(cell(rows, 2, "num_slo_met")));
}

TEST(Sweep, ReplicationsOffsetTheScenarioSeed) {
  std::string path = write_temp(
      "reps.toml", sweep_text("replications = 3\n[[parameters]]\nkey = \"run.duration_s\"\n"
                              "values = [0.2]\n"));
  SweepSpec spec = load_sweep(path);
  auto rows = rows_of(run_to_string(spec, 2));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1][3], "11");
  EXPECT_EQ(rows[2][3], "12");
  EXPECT_EQ(rows[3][3], "13");
}

// The resume point of a journal: the complete rows of the shard's runs in order after this
// sweep's header; a cut row is dropped; a foreign header or run is an error naming the line.
// A row of the grid's width: `first` cells (run_idx, ..., status), the planner cells of a sweep
// with the default limits and no price, the rest empty.
std::string full_row(const SweepSpec& spec, const std::string& first) {
  std::vector<std::string> header, cells;
  split_csv_line(sweep_csv_header(spec), header);
  split_csv_line(first, cells);
  cells.resize(header.size());
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "feasible_limits") cells[i] = slo_limits_text(SearchSlo{});
    if (header[i] == "max_duration_factor") cells[i] = "1";
  }
  return csv_line(cells) + "\n";
}

TEST(Sweep, ResumePointKeepsTheCompleteRowsOfTheShard) {
  const SweepSpec spec = load_sweep(kGrid);
  const std::string header = sweep_csv_header(spec) + "\n";
  const Shard all;
  EXPECT_EQ(find_resume_point(scratch::path("absent.partial"), spec, all).num_done, 0);
  const std::string rows = full_row(spec, "0,8,0,1,2,1,ok") + full_row(spec, "1,8,0,2,2,1,ok") +
                           full_row(spec, "2,8,1,1,2,2,ok");
  const ResumePoint p =
      find_resume_point(write_temp("j.partial", header + rows + "3,8,1"), spec, all);
  EXPECT_EQ(p.num_done, 3);
  EXPECT_EQ(p.keep_bytes, static_cast<int64_t>(header.size() + rows.size()));
  // The header alone, or half of it: start afresh.
  EXPECT_EQ(find_resume_point(write_temp("h.partial", header), spec, all).keep_bytes, 0);
  EXPECT_EQ(find_resume_point(write_temp("hh.partial", header.substr(0, 5)), spec, all).num_done,
            0);
  // Shard 2/2 holds runs 1, 3, ...
  const ResumePoint s2 =
      find_resume_point(write_temp("s.partial", header + full_row(spec, "1,8,0,2,2,1,ok") +
                                                    full_row(spec, "3,8,1,2,2,2,ok")),
                        spec, Shard{2, 2});
  EXPECT_EQ(s2.num_done, 2);
  EXPECT_NE(testing::config_error_of([&] {
              find_resume_point(write_temp("o.partial", "run_idx,num_runs,x\n"), spec, all);
            }).find("not the CSV of this sweep"),
            std::string::npos);
  EXPECT_NE(testing::config_error_of([&] {
              find_resume_point(
                  write_temp("g.partial", header + full_row(spec, "0,8,0,1,2,1,ok") + "5,8,2\n"),
                  spec, all);
            }).find(".partial:3: run_idx: expected run 1"),
            std::string::npos);
}

// The planner cells of the kept rows must be this sweep's: its limits, and a price from the flag
// exactly when the flag is given, at its value.
TEST(Sweep, ResumeRefusesRowsOfOtherPlannerSettings) {
  const SweepSpec spec = load_sweep(kGrid);
  const std::string header = sweep_csv_header(spec) + "\n";
  const std::string path = write_temp("p.partial", header + full_row(spec, "0,8,0,1,2,1,ok"));
  EXPECT_EQ(find_resume_point(path, spec, Shard{}).num_done, 1);
  SweepPlanner strict;
  strict.limits.min_attainment = 0.9;
  EXPECT_NE(testing::config_error_of([&] { find_resume_point(path, spec, Shard{}, strict); })
                .find("p.partial:2: feasible_limits: written with the limits 'attainment>=0.99' "
                      "where this sweep has 'attainment>=0.9'"),
            std::string::npos);
  SweepPlanner priced;
  priced.gpu_price_per_hour = 2.5;
  EXPECT_NE(testing::config_error_of([&] {
              find_resume_point(path, spec, Shard{}, priced);
            }).find("gpu_price_per_hour: written with another --gpu-price-per-hour"),
            std::string::npos);
  EXPECT_NE(
      testing::config_error_of([&] { find_resume_point(path, spec, Shard{}, SweepPlanner{}, 5); })
          .find("p.partial:2: max_duration_factor: written with --max-duration-factor 1 where "
                "this sweep has 5"),
      std::string::npos);
  // Rows of runs that did not run carry no planner cells.
  const std::string errors = write_temp("e.partial", header + full_row(spec, "0,8,0,1,2,1,error"));
  EXPECT_EQ(find_resume_point(errors, spec, Shard{}, strict).num_done, 1);
}

// A run not converged by its duration_s (1.5 s) runs on 1.5 s at a time up to the factor; one
// converged is not extended. Arrivals go on past the run's end; a 0.1% half-width target is not
// met even at 6 s, a 50% one at 1.5 s.
TEST(Sweep, RunsNotConvergedAreExtendedUpToTheFactor) {
  const std::string path = write_temp(
      "extend.toml", sweep_text("[[parameters]]\nkey = \"workload.duration_s\"\nvalues = [10]\n"
                                "[[parameters]]\nkey = \"run.steady_half_width\"\n"
                                "values = [0.001, 0.5]\n"));
  const SweepSpec spec = load_sweep(path);
  ScenarioTemplate t = ScenarioTemplate::load(spec.scenario_path);
  auto column = [](const std::vector<std::vector<std::string>>& rows, size_t r, const char* name) {
    const auto it = std::find(rows[0].begin(), rows[0].end(), name);
    EXPECT_NE(it, rows[0].end()) << name;
    return rows[r][static_cast<size_t>(it - rows[0].begin())];
  };
  std::ostringstream once, extended;
  run_sweep(spec, t, SweepOptions{}, once);
  SweepOptions opt;
  opt.max_duration_factor = 4;
  run_sweep(spec, t, opt, extended);
  const auto a = rows_of(once.str()), b = rows_of(extended.str());
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(column(a, 1, "converged"), "no");
  EXPECT_EQ(column(a, 1, "simulated_s"), "1.5");
  EXPECT_EQ(column(a, 1, "max_duration_factor"), "1");
  EXPECT_EQ(column(a, 1, "feasible"), "false");
  EXPECT_EQ(column(b, 1, "converged"), "no");
  EXPECT_EQ(column(b, 1, "simulated_s"), "6");
  EXPECT_EQ(column(b, 1, "max_duration_factor"), "4");
  EXPECT_GT(std::stoll(column(b, 1, "num_completed")), std::stoll(column(a, 1, "num_completed")));
  // Converged at 1.5 s: the same run either way.
  EXPECT_EQ(column(a, 2, "converged"), "yes");
  EXPECT_EQ(column(b, 2, "simulated_s"), "1.5");
  EXPECT_EQ(column(a, 2, "digest"), column(b, 2, "digest"));
}

// The planner columns (docs/sweeps.md, "Planner outputs"): tokens/s per GPU, GPU-hours and
// dollars per million tokens at the flag's price, and feasible under the sweep's limits.
TEST(Sweep, PlannerColumns) {
  const SweepSpec spec = load_sweep(kGrid);
  ScenarioTemplate t = ScenarioTemplate::load(spec.scenario_path);
  auto run = [&](const SweepPlanner& planner) {
    std::ostringstream os;
    SweepOptions opt;
    opt.num_threads = 2;
    opt.planner = planner;
    run_sweep(spec, t, opt, os);
    return rows_of(os.str());
  };
  SweepPlanner priced;
  priced.gpu_price_per_hour = 2.5;
  const auto rows = run(priced);
  ASSERT_EQ(rows.size(), 9u);
  for (size_t r = 1; r < rows.size(); ++r) {
    const double gpus = std::stod(cell(rows, r, "num_gpus"));
    const double out = std::stod(cell(rows, r, "output_tokens_per_s"));
    const double in = std::stod(cell(rows, r, "input_tokens_per_s"));
    EXPECT_NEAR(std::stod(cell(rows, r, "output_tokens_per_s_per_gpu")), out / gpus, 1e-12 * out);
    EXPECT_NEAR(std::stod(cell(rows, r, "input_tokens_per_s_per_gpu")), in / gpus, 1e-12 * in);
    const double gpuh_out = gpus * 1e6 / (out * 3600);
    EXPECT_NEAR(std::stod(cell(rows, r, "gpu_hours_per_m_output_tokens")), gpuh_out,
                1e-12 * gpuh_out);
    EXPECT_NEAR(std::stod(cell(rows, r, "usd_per_m_output_tokens")), 2.5 * gpuh_out,
                1e-12 * gpuh_out);
    EXPECT_EQ(cell(rows, r, "gpu_price_per_hour"), "2.5");
    EXPECT_EQ(cell(rows, r, "gpu_price_source"), "flag");
    EXPECT_EQ(cell(rows, r, "feasible_limits"), "attainment>=0.99");
    const bool meets = std::stod(cell(rows, r, "slo_attainment")) >= 0.99;
    EXPECT_EQ(cell(rows, r, "feasible"), meets ? "true" : "false");
    EXPECT_EQ(cell(rows, r, "infeasible_reason").empty(), meets);
  }
  // No price: the dollar cells are empty, never a made-up number; a percentile limit that every
  // run breaks makes every row infeasible, with the limit named.
  SweepPlanner tight;
  tight.limits.percentile_limits = {{"ttft_p50_ms", 1e-3}};
  const auto strict = run(tight);
  for (size_t r = 1; r < strict.size(); ++r) {
    EXPECT_EQ(cell(strict, r, "usd_per_m_output_tokens"), "");
    EXPECT_EQ(cell(strict, r, "gpu_price_per_hour"), "");
    EXPECT_EQ(cell(strict, r, "gpu_price_source"), "");
    EXPECT_FALSE(cell(strict, r, "gpu_hours_per_m_output_tokens").empty());
    EXPECT_EQ(cell(strict, r, "feasible"), "false");
    EXPECT_EQ(cell(strict, r, "infeasible_reason").rfind("ttft_p50_ms ", 0), 0u);
    EXPECT_EQ(cell(strict, r, "feasible_limits"), "ttft_p50_ms<=0.001, attainment>=0.99");
  }
}

// Two GPU types in one sweep, each cell priced at its own topology's [gpu] price_usd_per_hour.
TEST(Sweep, EachCellAtItsTopologysPrice) {
  const std::string topo = std::string(MOESIM_SOURCE_DIR) + "/topologies/";
  const SweepSpec spec = load_sweep(
      write_temp("gpus.toml", sweep_text("[[parameters]]\nkey = \"topology\"\nvalues = [\"" + topo +
                                         "h100-node.toml\", \"" + topo + "h200-node.toml\"]\n")));
  const auto rows = rows_of(run_to_string(spec, 2));
  ASSERT_EQ(rows.size(), 3u);
  const char* prices[] = {"6.155", "6.305"};
  for (size_t r = 1; r < rows.size(); ++r) {
    EXPECT_EQ(cell(rows, r, "status"), "ok");
    EXPECT_EQ(cell(rows, r, "gpu_price_per_hour"), prices[r - 1]);
    EXPECT_EQ(cell(rows, r, "gpu_price_source"), "topology");
    const double gpuh = std::stod(cell(rows, r, "gpu_hours_per_m_output_tokens"));
    EXPECT_NEAR(std::stod(cell(rows, r, "usd_per_m_output_tokens")),
                std::stod(prices[r - 1]) * gpuh, 1e-12 * gpuh);
    // Interactivity: 1000 / TPOT p50 (ms).
    EXPECT_NEAR(std::stod(cell(rows, r, "output_tokens_per_s_per_user")),
                1000.0 / std::stod(cell(rows, r, "tpot_p50_ms")), 1e-9);
  }
}

}  // namespace
}  // namespace moesim::sim::study

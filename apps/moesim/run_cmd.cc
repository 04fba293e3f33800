// `moesim run SCENARIO`: simulates a scenario, prints the summary and the event digest, and
// writes the outputs and the resolved configuration to --out DIR. Output paths are checked, and
// --out locked, before the simulation starts; every file is written atomically (sim/io).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "apps/moesim/cli.h"
#include "apps/moesim/diagnosis_output.h"
#include "sim/io/output_files.h"
#include "sim/metrics/figure_text.h"
#include "sim/policy/policy_registry.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"
#include "sim/serving/run_outputs.h"
#include "sim/study/infeasibility.h"
#include "sim/study/overrides.h"
#include "sim/study/slo_limits.h"

namespace moesim::cli {
namespace {

constexpr const char* kUsage =
    "usage: moesim run SCENARIO [--set KEY.PATH=VALUE]... [--seed N] [--duration SECONDS]\n"
    "                  [--out DIR] [--record FILE] [--record-steps N]\n"
    "                  [--trace-window START_S:END_S] [--diagnose] [--json]\n\n"
    "Simulates SCENARIO (a scenarios/*.toml file) and prints the summary and the event digest.\n"
    "  --set K=V             override one scenario value (repeatable; as a sweep parameter,\n"
    "                        docs/sweeps.md), e.g. --set deployment.replicas=2\n"
    "  --seed N              root seed (default: the scenario's [run] seed)\n"
    "  --duration SECONDS    simulated time (default: the scenario's [run] duration_s)\n"
    "  --out DIR             write summary.json, requests.csv, steps.csv, trace.json (Chrome\n"
    "                        trace) and resolved/ (the resolved configuration and its inputs);\n"
    "                        `moesim report DIR -o report.html` makes an HTML page of them\n"
    "  --record FILE         write the executed steps as JSONL (docs/schemas/step_trace.md)\n"
    "  --record-steps N      steps recorded at most (default: [outputs] record_max_steps)\n"
    "  --trace-window A:B    Chrome-trace window in simulated seconds\n"
    "  --tier exact|fast     the step model's tier (overrides run.tier; docs/fast_tier.md)\n"
    "  --tier-check N        also time every N-th step of each replica on the other tier and\n"
    "                        report the agreement (the run itself is unchanged)\n"
    "  --diagnose            after the run, say which of its requests no rate could serve\n"
    "                        within the scenario's [slo] (each alone on an idle replica:\n"
    "                        isolated prefill vs ttft_ms, decode vs tpot_ms, KV fit;\n"
    "                        docs/outputs.md, \"Diagnosis\")\n"
    "  --json                print the summary as one JSON document instead of the table\n"
    "exit codes: 0 success, 1 conservation broken or an output not written, 2 bad input\n"
    "           (including an --out that cannot be a directory or is in use by another run)\n";

constexpr double kDiagnosisAttainment = 0.99;

// What --diagnose found, for the text summary; without it, a hint when the run missed its SLOs.
std::string diagnosis_text(const sim::RunOutput& out, const std::optional<sim::study::Diagnosis>& d,
                           const sim::study::SearchSlo& slo) {
  if (!d) {
    const sim::SloSummary& s = out.summary.slo;
    if (s.num_decided == 0 || s.attainment >= kDiagnosisAttainment) return "";
    return "  SLO attainment is below " + sim::number_text(kDiagnosisAttainment) +
           ": moesim run --diagnose says which requests no rate can serve within the limits\n";
  }
  std::string text = "  diagnosis (" + sim::study::slo_limits_text(slo) + "; " +
                     std::to_string(d->num_requests) +
                     " requests, each alone on an idle replica: " + d->where + "):\n";
  if (d->findings.empty()) {
    return text +
           "    no request is beyond a limit on its own (isolated prefill, decode, KV fit): "
           "what the run missed, load and batching caused\n";
  }
  text += diagnosis_findings_text(*d, "    ");
  text += d->infeasible() ? "    INFEASIBLE AT ANY RATE for this deployment\n"
                          : "    feasible at some rate: the rest of what the run missed, load and "
                            "batching caused\n";
  return text;
}

Args run_args(const std::vector<std::string>& argv) {
  return Args(argv,
              {"--seed", "--duration", "--out", "--record", "--record-steps", "--trace-window",
               "--tier", "--tier-check"},
              {"--set"});
}

// The command once its arguments are split: `given` is the scenario of run_command_on, else
// SCENARIO is the first positional. The summary (table or --json) goes to `report`.
int run_with(Args& args, const sim::study::ScenarioTemplate* given, std::ostream& report) {
  if (args.help_requested()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string path = given ? given->path() : args.positional(0, "SCENARIO");
  std::vector<sim::study::Override> overrides;
  for (const std::string& text : args.values("--set")) {
    overrides.push_back(sim::study::parse_override(text, "--set"));
  }
  auto seed = args.int_value("--seed");
  auto duration = args.double_value("--duration");
  auto out_dir = args.value("--out");
  auto record = args.value("--record");
  auto record_steps = args.int_value("--record-steps");
  auto window = args.value("--trace-window");
  auto tier = args.value("--tier");
  auto tier_check = args.int_value("--tier-check");
  bool json = args.flag("--json");
  const bool diagnose = args.flag("--diagnose");
  args.finish(given ? 0 : 1);
  if (seed && *seed < 0) throw UsageError{"--seed must be >= 0"};
  // run.duration_s's range (also what keeps the run's end within the horizon).
  if (duration && !(*duration >= 1e-6 && *duration <= 1e7)) {
    throw UsageError{"--duration must be in [1e-6, 1e7] seconds (run.duration_s's range)"};
  }
  if (record_steps && *record_steps <= 0) throw UsageError{"--record-steps must be > 0"};
  if (tier_check && *tier_check <= 0) throw UsageError{"--tier-check must be > 0"};

  // Without overrides a file is read as it always was; otherwise (and for a scenario held in
  // memory) the scenario is the template's text with the overrides applied, which is also what
  // resolved/scenario.toml then holds.
  std::optional<sim::study::ScenarioTemplate> loaded;
  if (!given && !overrides.empty()) loaded = sim::study::ScenarioTemplate::load(path);
  const sim::study::ScenarioTemplate* scenario_template = given    ? given
                                                          : loaded ? &*loaded
                                                                   : nullptr;
  sim::Scenario sc = [&] {
    if (scenario_template) return scenario_template->instantiate(overrides);
    sim::Scenario s = sim::load_scenario(path);
    sim::resolve_policy_settings(s);
    return s;
  }();
  if (duration) sc.run.duration_s = *duration;
  if (tier) {
    if (*tier != "exact" && *tier != "fast") throw UsageError{"--tier wants exact or fast"};
    sc.run.tier = *tier == "fast" ? sim::SimTier::kFast : sim::SimTier::kExact;
    if (sc.run.tier == sim::SimTier::kFast && sc.network_model != "bottleneck" &&
        sc.network_model != "bottleneck_factored") {
      throw UsageError{
          "--tier fast times collectives with the link-load bound; network.model = \"" +
          sc.network_model + "\" needs the exact tier"};
    }
  }
  if (record && sc.run.tier == sim::SimTier::kFast) {
    throw UsageError{
        "--record needs the exact tier: the fast tier draws no (source, destination) "
        "routing to record (run.tier = \"exact\" or --tier exact)"};
  }
  sim::RunOptions opt;
  opt.chrome_trace = out_dir.has_value() && sc.outputs.chrome_trace;
  opt.trace_start_ns = sim::from_seconds(sc.outputs.trace_start_s);
  opt.trace_end_ns = sim::from_seconds(sc.outputs.trace_end_s);
  if (window) {
    auto colon = window->find(':');
    char* end = nullptr;
    double a = std::strtod(window->c_str(), &end);
    if (colon == std::string::npos || end != window->c_str() + colon) {
      throw UsageError{"--trace-window wants START_S:END_S"};
    }
    double b = std::strtod(window->c_str() + colon + 1, &end);
    // NaN fails every comparison; the end is bounded like outputs.trace_end_s.
    if (*end != '\0' || !(a >= 0 && b >= a && b <= 1e7)) {
      throw UsageError{"--trace-window wants 0 <= START <= END <= 1e7"};
    }
    if (!out_dir) throw UsageError{"--trace-window needs --out DIR (the trace is DIR/trace.json)"};
    opt.trace_start_ns = sim::from_seconds(a);
    opt.trace_end_ns = sim::from_seconds(b);
    opt.chrome_trace = true;
  }
  opt.record_steps = record.has_value();
  if (tier_check) {
    if (sc.network_model != "bottleneck" && sc.network_model != "bottleneck_factored") {
      throw UsageError{"--tier-check runs the fast tier, which needs network.model = bottleneck"};
    }
    opt.tier_check_every = *tier_check;
  }
  opt.record_max_steps = record_steps ? *record_steps : sc.outputs.record_max_steps;
  uint64_t used_seed = seed ? static_cast<uint64_t>(*seed) : sc.run.seed;

  namespace fs = std::filesystem;
  std::optional<sim::io::OutputDirLock> out_lock;  // held until the outputs are written
  if (out_dir) {
    out_lock.emplace(*out_dir, "--out");
    sim::io::ensure_output_dir((fs::path(*out_dir) / "resolved").string(), "--out");
  }
  if (record) sim::io::check_output_file(*record, "--record");
  // requests.csv, steps.csv and trace.json stream to their temporaries while the run goes (the
  // run keeps none of them in memory) and are renamed into place after it.
  std::optional<sim::io::AtomicFile> requests_file, steps_file, trace_file;
  std::optional<sim::RequestsCsvWriter> requests_writer;
  std::optional<sim::StepsCsvWriter> steps_writer;
  std::optional<sim::ChromeTraceWriter> trace_writer;
  if (out_dir && sc.outputs.requests_csv) {
    requests_file.emplace((fs::path(*out_dir) / "requests.csv").string());
    requests_writer.emplace(requests_file->stream());
    opt.request_sinks.push_back(&*requests_writer);
  }
  if (out_dir && sc.outputs.steps_csv) {
    steps_file.emplace((fs::path(*out_dir) / "steps.csv").string());
    steps_writer.emplace(steps_file->stream());
    opt.step_series_sink = &*steps_writer;
  }
  if (out_dir && opt.chrome_trace) {
    trace_file.emplace((fs::path(*out_dir) / "trace.json").string());
    trace_writer.emplace(trace_file->stream(), &sc.deployment);
    opt.trace_sink = &*trace_writer;
  }

  auto policies = sim::make_policies(sc);
  auto wall_start = std::chrono::steady_clock::now();
  sim::RunOutput out =
      sim::run_scenario(sc, opt, static_cast<int64_t>(used_seed), std::move(policies));
  double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();

  // The run's own requests, each alone on an idle replica, against the scenario's [slo]
  // (sim/study/infeasibility.h): the percentile limits at p99 and attainment >= 0.99.
  std::optional<sim::study::Diagnosis> diagnosis;
  sim::study::SearchSlo diagnosis_slo;
  if (diagnose) {
    diagnosis_slo.percentile_limits = {{"ttft_p99_ms", sc.slo.ttft_ms},
                                       {"tpot_p99_ms", sc.slo.tpot_ms}};
    diagnosis_slo.min_attainment = kDiagnosisAttainment;
    diagnosis = sim::study::diagnose_scenario(sc, diagnosis_slo, used_seed);
  }
  if (json) {
    nlohmann::json j = sim::summary_json(sc, out, used_seed);
    j["wall_s"] = wall_s;
    if (diagnosis) {
      j["diagnosis"] = diagnosis_report_json(*diagnosis);
      j["diagnosis"]["limits"] = sim::study::slo_limits_text(diagnosis_slo);
    }
    report << j.dump(2) << "\n";
  } else {
    sim::write_summary_text(report, sc, out, used_seed);
    char wall[96];
    std::snprintf(wall, sizeof(wall), "  wall time %.2f s (%.1fx real time)\n", wall_s,
                  wall_s > 0 ? out.summary.duration_s / wall_s : 0.0);
    report << wall;
    report << diagnosis_text(out, diagnosis, diagnosis_slo);
  }
  if (out_dir) {
    using sim::io::write_file_atomically;
    fs::path dir(*out_dir);
    if (sc.outputs.summary_json) {
      write_file_atomically((dir / "summary.json").string(), [&](std::ostream& os) {
        os << sim::summary_json(sc, out, used_seed).dump(2) << "\n";
      });
    }
    if (requests_file) requests_file->commit();
    if (steps_file) steps_file->commit();
    if (trace_file) {
      trace_writer->finish();
      trace_file->commit();
    }
    // The resolved configuration: the inputs as read, and the values the run used.
    const fs::path resolved = dir / "resolved";
    if (scenario_template) {
      write_file_atomically((resolved / "scenario.toml").string(), [&](std::ostream& os) {
        os << scenario_template->text_with(overrides);
      });
    } else {
      sim::io::copy_file_atomically(sc.source_file, (resolved / "scenario.toml").string());
    }
    sim::io::copy_file_atomically(sc.model_path,
                                  (resolved / fs::path(sc.model_path).filename()).string());
    sim::io::copy_file_atomically(sc.topology_path,
                                  (resolved / fs::path(sc.topology_path).filename()).string());
    write_file_atomically((resolved / "run.json").string(), [&](std::ostream& os) {
      nlohmann::json j;
      j["seed"] = used_seed;
      j["duration_s"] = sc.run.duration_s;
      j["network_model"] = sc.network_model;
      j["cost_model"] = sc.cost.kind == sim::CostModelKind::kRoofline ? "roofline" : "calibrated";
      j["router"] = sim::router_policy_name(sc.scheduler.router);
      j["max_seqs"] = sc.scheduler.max_seqs;
      j["max_batch_tokens_per_gpu"] = sc.scheduler.max_batch_tokens_per_gpu;
      j["kv_block_tokens"] = sc.scheduler.kv_block_tokens;
      j["prefix_caching"] = sc.scheduler.prefix_caching;
      j["workspace_gib"] = sc.scheduler.workspace_gib;
      j["hbm_reserve_fraction"] = sc.scheduler.hbm_reserve_fraction;
      j["replicas"] = sc.deployment.num_replicas;
      j["gpus_per_replica"] = sc.deployment.gpus_per_replica;
      j["routing_preset"] = sc.routing.preset;
      j["slo_ttft_ms"] = sc.slo.ttft_ms;
      j["slo_tpot_ms"] = sc.slo.tpot_ms;
      j["model"] = sim::model_shapes_json(*sc.model, sc.deployment);
      if (sc.kv_tiers.enabled) {
        // The tiers with the topology's [host] (and, for the cluster store, NIC) figures.
        const sim::KvTierSpec& k = sc.kv_tiers;
        j["kv_tiers"] = {{"scope", k.cluster_scope ? "cluster" : "node"},
                         {"dram_bytes_per_node", k.dram_bytes_per_node},
                         {"ssd_bytes_per_node", k.ssd_bytes_per_node},
                         {"pcie_bytes_per_s", k.pcie_bytes_per_s},
                         {"pcie_latency_ns", k.pcie_latency_ns},
                         {"nvme_bytes_per_s", k.nvme_bytes_per_s},
                         {"nvme_latency_ns", k.nvme_latency_ns},
                         {"nic_bytes_per_s", k.nic_bytes_per_s},
                         {"nic_latency_ns", k.nic_latency_ns}};
      }
      os << j.dump(2) << "\n";
    });
  }
  if (record) {
    sim::io::write_file_atomically(
        *record, [&](std::ostream& os) { sim::write_step_trace(os, sc, out, used_seed); });
  }
  return out.conservation_ok ? 0 : 1;
}

}  // namespace

int run_command(const std::vector<std::string>& argv) {
  Args args = run_args(argv);
  return run_with(args, nullptr, std::cout);
}

int run_command_on(const sim::study::ScenarioTemplate* scenario,
                   const std::vector<std::string>& argv, std::ostream& report) {
  Args args = run_args(argv);
  return run_with(args, scenario, report);
}

}  // namespace moesim::cli

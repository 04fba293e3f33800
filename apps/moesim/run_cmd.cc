// `moesim run SCENARIO`: simulates a scenario (sim/api/run.h), prints the summary and the event
// digest, and writes the outputs and the resolved configuration to --out DIR.
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "apps/moesim/cli.h"
#include "base/number_text.h"
#include "sim/api/run.h"

namespace moesim::cli {
namespace {

constexpr const char* kDescription =
    "Simulates SCENARIO (a scenarios/*.toml file) and prints the summary and the event digest.\n"
    "Output paths are checked, and --out, --record and --export-requests locked, before the\n"
    "simulation starts; every file is written atomically, and summary.json, the mark of a\n"
    "complete --out, comes last.";

constexpr const char* kFooter =
    "exit codes: 0 success, 1 conservation broken or an output not written, 2 bad input\n"
    "           (including an --out that cannot be a directory or is in use by another run);\n"
    "           SIGTERM, SIGINT, SIGHUP remove the temporaries and end it with 128 + the signal";

// "START_S:END_S" of --trace-window: two finite numbers (their range is the API's check).
std::pair<double, double> trace_window(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) throw UsageError{"--trace-window wants START_S:END_S"};
  std::string reason;
  const std::optional<double> a = parse_number_text(text.substr(0, colon), &reason);
  const std::optional<double> b = a ? parse_number_text(text.substr(colon + 1), &reason) : a;
  if (!b) throw UsageError{"--trace-window wants START_S:END_S: " + reason};
  return {*a, *b};
}

}  // namespace

int run_command(const std::vector<std::string>& argv) {
  sim::api::RunRequest request;
  std::vector<std::string> sets;
  bool json = false;
  CommandLine cl("run SCENARIO [options]", kDescription);
  cl.positional("SCENARIO", &request.scenario.path, "a scenario file (scenarios/*.toml)")
      .option("--set", &sets, "KEY.PATH=VALUE",
              "override one scenario value (repeatable; as a sweep parameter, docs/sweeps.md), "
              "e.g. --set deployment.replicas=2")
      .option("--drop", &request.scenario.dropped, "KEY.PATH",
              "remove a key or table from the scenario before the --set overrides (repeatable; "
              "as moesim compare --drop-a), e.g. --drop policies")
      .option("--seed", &request.seed, "N", "root seed (default: the scenario's [run] seed)")
      .option("--duration", &request.duration_s, "SECONDS",
              "simulated time (default: the scenario's [run] duration_s)")
      .option("-o,--out", &request.out_dir, "DIR",
              "write summary.json, requests.csv, steps.csv, trace.json (Chrome trace) and "
              "resolved/ (the resolved configuration and its inputs); `moesim report DIR --out "
              "report.html` makes an HTML page of them")
      .option("--record", &request.record_path, "FILE",
              "write the executed steps as JSONL (docs/schemas/step_trace.md)")
      .option("--export-requests", &request.export_requests_path, "FILE",
              "write every arrival as the request trace, JSONL (docs/schemas/request_trace.md): "
              "what `moesim-engine serve` serves and a [workload] kind = \"request_trace\" "
              "replays")
      .option("--record-steps", &request.record_steps, "N",
              "steps recorded at most (default: [outputs] record_max_steps)")
      .option_with("--trace-window", "START_S:END_S", "Chrome-trace window in simulated seconds",
                   [&](const std::string& text) { request.trace_window_s = trace_window(text); })
      .option("--fidelity", &request.fidelity, "exact|fast",
              "the step model's fidelity (overrides run.fidelity; docs/fast_fidelity.md)")
      .option("--fidelity-check", &request.fidelity_check, "N",
              "also time every N-th step of each replica on the other fidelity and report the "
              "agreement (the run itself is unchanged)")
      .flag("--diagnose", &request.diagnose,
            "after the run, say which of its requests no rate could serve within the scenario's "
            "[slo] (each alone on an idle replica: isolated prefill vs ttft_ms, decode vs "
            "tpot_ms, KV fit; docs/outputs.md, \"Diagnosis\")")
      .option("--replications", &request.replications, "N",
              "also run seeds SEED + 1 .. SEED + N - 1 and print each headline figure's mean and "
              "95% interval over the N runs (the first run's summary is printed in full)")
      .option("--threads", &request.threads, "N",
              "threads for --replications (default: hardware threads); the result is the same "
              "for every N")
      .flag("--json", &json, "print the summary as one JSON document instead of the table")
      .footer(kFooter);
  if (!cl.parse(argv)) return 0;
  for (const std::string& text : sets) {
    request.scenario.overrides.push_back(sim::study::parse_override(text, "--set"));
  }
  // The summary is printed before the outputs are written: a failed write comes after it.
  request.on_finished = [json](const sim::api::RunResult& result) {
    if (json) {
      std::cout << sim::api::run_json(result).dump(2) << "\n";
    } else {
      sim::api::write_run_text(std::cout, result);
    }
  };
  return sim::api::run(request).exit_code();
}

}  // namespace moesim::cli

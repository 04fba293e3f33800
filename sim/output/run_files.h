// The files of one run (`moesim run --out DIR [--record FILE]`, docs/outputs.md): the output
// directory is locked and every output path checked before the simulation starts;
// requests.csv, steps.csv and trace.json stream to temporaries while the run goes (the run keeps
// none of them in memory) and are renamed into place after it, with summary.json, resolved/ (the
// configuration as read and the values the run used) and the step trace. Every file is written
// atomically (sim/io).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sim/io/output_files.h"
#include "sim/output/file_record_spool.h"
#include "sim/output/run_outputs.h"

namespace moesim::sim::output {

class RunFiles {
 public:
  // Locks `out_dir` (option "--out") and makes out_dir/resolved, checks `record_path` ("--record")
  // (bad input otherwise, before any work), and opens the streamed outputs the scenario's
  // [outputs] asks for: requests.csv, steps.csv, and trace.json when options.chrome_trace. They
  // are hooked into `options` (sinks, not owned by it). Either path may be absent. `scenario`
  // must outlive this object.
  RunFiles(const Scenario& scenario, const std::optional<std::string>& out_dir,
           const std::optional<std::string>& record_path, RunOptions& options);
  ~RunFiles();
  RunFiles(const RunFiles&) = delete;
  RunFiles& operator=(const RunFiles&) = delete;

  // After the run: summary.json, the streamed files, resolved/ (scenario.toml: `scenario_text`
  // when given, the scenario with overrides or held in memory, else a copy of its file; the model
  // card, the topology and run.json), then the step trace at record_path. Throws OutputError when
  // a file cannot be written.
  void commit(const RunOutput& out, uint64_t seed, const std::optional<std::string>& scenario_text);

 private:
  void commit_out_dir(const RunOutput& out, uint64_t seed,
                      const std::optional<std::string>& scenario_text);

  const Scenario& scenario_;
  std::optional<std::string> out_dir_, record_path_;
  std::optional<io::OutputDirLock> lock_;  // held until the outputs are written
  std::optional<io::AtomicFile> requests_file_, steps_file_, trace_file_;
  std::optional<RequestsCsvWriter> requests_writer_;
  // Where rejected requests' records wait for older ones (with requests.csv).
  std::optional<FileRecordSpool> record_spool_;
  std::optional<StepsCsvWriter> steps_writer_;
  std::optional<ChromeTraceWriter> trace_writer_;
};

// resolved/run.json: the seed and the values the run used (models, scheduler, deployment, SLO,
// the model's shapes, the KV tiers with the topology's figures).
nlohmann::json resolved_run_json(const Scenario& sc, uint64_t seed);

}  // namespace moesim::sim::output

// The files of one run (`moesim run --out DIR [--record FILE] [--export-requests FILE]`,
// docs/outputs.md): the output directory and the record files are locked and every output path
// checked before the simulation starts; requests.csv, steps.csv and trace.json stream to
// temporaries while the run goes (the run keeps none of them in memory). After it, every file is
// first completed under its temporary name, with summary.json, resolved/ (the configuration as read
// and the values the run used), the step trace and the request trace; only then are they renamed
// into place, summary.json last: it is the mark of a complete directory, removed before the first
// rename. A failure before the renames (a full disk) leaves the directory as it was; a signal
// during them leaves no summary.json. Every file is written atomically (sim/io), and a signal
// removes the temporaries (sim/io/signal_cleanup.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/io/output_files.h"
#include "sim/output/file_record_spool.h"
#include "sim/output/request_trace.h"
#include "sim/output/run_outputs.h"

namespace moesim::sim::output {

class RunFiles {
 public:
  // Locks `out_dir` (option "--out"), makes out_dir/resolved and removes the temporaries a killed
  // run left there; checks and locks `record_path` ("--record") (bad input otherwise, before any
  // work), and opens the streamed outputs the scenario's [outputs] asks for: requests.csv,
  // steps.csv, and trace.json when options.chrome_trace. They are hooked into `options` (sinks,
  // not owned by it). Either path may be absent. `scenario` must outlive this object.
  RunFiles(const Scenario& scenario, const std::optional<std::string>& out_dir,
           const std::optional<std::string>& record_path, RunOptions& options);
  ~RunFiles();
  // Also the request trace at `path` ("--export-requests", request_trace.h): checked and locked
  // now, its records spooled through options.arrival_sink while the run goes (it asks for
  // options.expert_selections), completed and published by commit() with the other files.
  void export_requests(const std::string& path, RunOptions& options);
  RunFiles(const RunFiles&) = delete;
  RunFiles& operator=(const RunFiles&) = delete;

  // After the run: completes the streamed files (the one whose write failed first is reported
  // first), writes resolved/ (scenario.toml: `scenario_text` when given, the scenario with
  // overrides or held in memory, else a copy of its file; the model card, the topology and
  // run.json), the step trace at record_path, the request trace and summary.json, then renames them
  // into place, summary.json last. Outputs of an earlier run in the directory that this run does
  // not write (requests.csv, steps.csv, trace.json) are removed with the old summary.json. Throws
  // OutputError when a file cannot be written.
  void commit(const RunOutput& out, uint64_t seed, const std::optional<std::string>& scenario_text);

 private:
  // The streamed files completed, the one that failed first first.
  void prepare_streamed();
  // resolved/ written to temporaries, appended to `files`.
  void prepare_resolved(uint64_t seed, const std::optional<std::string>& scenario_text,
                        std::vector<std::unique_ptr<io::AtomicFile>>& files);

  const Scenario& scenario_;
  std::optional<std::string> out_dir_, record_path_;
  std::optional<io::OutputDirLock> lock_;  // held until the outputs are written
  std::optional<io::OutputFileLock> record_lock_;
  std::optional<io::AtomicFile> requests_file_, steps_file_, trace_file_;
  std::optional<RequestsCsvWriter> requests_writer_;
  // Where rejected requests' records wait for older ones (with requests.csv).
  std::optional<FileRecordSpool> record_spool_;
  std::optional<StepsCsvWriter> steps_writer_;
  std::optional<ChromeTraceWriter> trace_writer_;
  std::optional<RequestTraceWriter> request_trace_;  // export_requests()
};

// resolved/run.json: the seed and the values the run used (models, scheduler, deployment, SLO,
// the model's shapes, the KV tiers with the topology's figures).
nlohmann::json resolved_run_json(const Scenario& sc, uint64_t seed);

}  // namespace moesim::sim::output

// The request trace (`moesim run --export-requests FILE`, docs/schemas/request_trace.md): JSON
// Lines, a header (the step trace's header fields, written by the same function, plus the
// resolved scheduler, router, pools, admission policies, routing statistics, SLO and duration),
// then one record per arrival in arrival order, rejected ones included. It is what the engine
// serves (`moesim-engine serve`) and what a workload of kind "request_trace" replays.
//
// Streaming: the header's routing statistics are only known when the run ends, so the request
// records go to an unnamed spool file while the run goes (memory stays one buffer whatever the
// arrivals) and prepare() writes header + spooled records to the output's temporary. The output
// is checked and locked before the run, written atomically and published with the run's other
// files (sim/io); the spool never outlives the process (O_TMPFILE, or a name unlinked at once).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "sim/io/output_files.h"
#include "sim/metrics/run_recorder.h"
#include "sim/scenario/scenario.h"
#include "sim/serving/cluster.h"

namespace moesim::sim::output {

inline constexpr const char* kRequestTraceSchema = "moesim.request_trace.v1";

// The request trace's header: trace_header_json's fields (schema kRequestTraceSchema) plus
// scheduler, router, pools, admission, unsupported_policies, routing.expert_share (from
// out.expert_selections, normalised per MoE layer), slo and duration_ns.
nlohmann::json request_trace_header_json(const Scenario& sc, const RunOutput& out, uint64_t seed);

// One arrival as a request record: request_id, arrival_ns, prompt_tokens, output_tokens,
// session_id, turn_idx, domain, and prefix_blocks when `with_prefix_blocks`.
nlohmann::json request_record_json(const Request& request, SimTime arrival_ns,
                                   bool with_prefix_blocks);

class RequestTraceWriter final : public ArrivalSink {
 public:
  // Checks `path` as an output of option `option` (ConfigError, exit 2, naming the path), locks
  // it and opens the spool beside it (OutputError when it cannot be made). `scenario` must
  // outlive the writer: its prefix caching says whether records carry prefix_blocks.
  RequestTraceWriter(const std::string& path, const Scenario& scenario,
                     const std::string& option = "--export-requests");
  ~RequestTraceWriter() override;
  RequestTraceWriter(const RequestTraceWriter&) = delete;
  RequestTraceWriter& operator=(const RequestTraceWriter&) = delete;

  // Appends the arrival's record to the spool. Throws io::OutputError naming the output path
  // when the spool cannot be written (a full disk).
  void add(const Request& request, SimTime arrival_ns) override;

  // After the run: the whole trace (header, then the spooled records) under the output's
  // temporary name, flushed and closed; publish() puts it in place. Throws io::OutputError.
  std::unique_ptr<io::AtomicFile> prepare(const RunOutput& out, uint64_t seed);

  int64_t num_records() const { return num_records_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err) const;
  void flush();

  std::string path_;
  const Scenario& scenario_;
  std::optional<io::OutputFileLock> lock_;
  int fd_ = -1;         // the spool
  std::string buffer_;  // records not yet written to the spool
  int64_t num_records_ = 0;
};

}  // namespace moesim::sim::output

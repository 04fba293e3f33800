#include "engine/in_process_replay.h"

#include <exception>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/check.h"
#include "engine/cpu/thread_communicator.h"
#include "engine/timing.h"

namespace moesim::engine {

namespace {

// What one rank's thread leaves behind.
struct RankResult {
  std::ostringstream records;  // the rank's whole measurement stream, header first
  ReplaySummary summary;
  MeasurementHeader header;
  std::exception_ptr error;
  bool aborted = false;  // woken by another rank's failure
};

void run_rank(int rank, const StepTrace& trace, const ReplayOptions& options,
              const RankBackendFactory& make_rank_backend,
              const std::shared_ptr<Communicator>& communicator, RankResult& result) {
  try {
    std::unique_ptr<Backend> backend = make_rank_backend(rank);
    DistributedConfig config;
    config.rank = rank;
    config.world_size = communicator->world_size();
    config.communicator = communicator;
    backend->init_distributed(config);
    // Each rank's thread (and its backend's workers) on CPUs of its own when there are enough.
    ReplayOptions rank_options = options;
    rank_options.timing.pinned =
        pin_op_threads(options.timing.pin, rank, config.world_size, backend->worker_thread_ids());
    MeasurementWriter writer(result.records);
    result.summary = replay_trace(*backend, trace, rank_options, writer);
    result.header = make_replay_header(*backend, trace, rank_options, result.summary);
  } catch (const CommunicatorAbortedError&) {
    result.aborted = true;
  } catch (...) {
    result.error = std::current_exception();
    cpu::abort_thread_group(*communicator);
  }
}

}  // namespace

ReplaySummary replay_trace_in_process(const StepTrace& trace, const ReplayOptions& options,
                                      int num_ranks, const RankBackendFactory& make_rank_backend,
                                      MeasurementWriter& writer) {
  MOESIM_CHECK(num_ranks >= 2, "replay_trace_in_process: num_ranks >= 2");
  const std::vector<std::shared_ptr<Communicator>> communicators =
      cpu::make_thread_communicators(num_ranks);
  std::vector<RankResult> results(num_ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < num_ranks; ++r) {
    threads.emplace_back(run_rank, r, std::cref(trace), std::cref(options),
                         std::cref(make_rank_backend), std::cref(communicators[r]),
                         std::ref(results[r]));
  }
  for (std::thread& t : threads) t.join();
  for (const RankResult& r : results) {
    if (r.error) std::rethrow_exception(r.error);
  }
  for (const RankResult& r : results) {
    MOESIM_CHECK(!r.aborted, "a rank was aborted although no rank failed");
  }

  ReplaySummary merged = results[0].summary;
  merged.gpus.clear();
  merged.num_op_records = 0;
  merged.num_step_records = 0;
  for (const RankResult& r : results) {
    merged.gpus.insert(merged.gpus.end(), r.summary.gpus.begin(), r.summary.gpus.end());
    merged.num_op_records += r.summary.num_op_records;
    merged.num_step_records += r.summary.num_step_records;
  }
  MeasurementHeader header = results[0].header;
  header.sim_gpus = merged.gpus;
  writer.write_header(header);
  for (const RankResult& r : results) {
    const std::string text = r.records.str();
    const size_t header_end = text.find('\n');
    MOESIM_CHECK(header_end != std::string::npos, "a rank wrote no header");
    writer.append_records(std::string_view(text).substr(header_end + 1));
  }
  return merged;
}

}  // namespace moesim::engine

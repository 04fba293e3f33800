// moesim-engine: replays recorded simulator steps on a backend and measures them, benchmarks
// each operation, or serves a request trace with its own scheduler. Exit codes, as moesim's: 0
// success; 1 runtime failure (out of memory, backend unavailable, a write that failed, e.g. a full
// disk); 2 usage or input error (bad flags, values outside their domains, a malformed or mismatched
// trace, an --out that cannot be opened).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/bench.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/in_process_replay.h"
#include "engine/input_error.h"
#include "engine/launch_ranks.h"
#include "engine/measurement.h"
#include "engine/mpi_launch.h"
#include "engine/options.h"
#include "engine/replay.h"
#include "engine/replay_plan.h"
#include "engine/serve/serve_command.h"
#include "engine/shape_limits.h"
#include "engine/step_trace.h"
#include "moesim_version.h"

namespace moesim::engine {
namespace {

constexpr const char* kUsage = R"(usage:
  moesim-engine replay STEPS.jsonl --out MEAS.jsonl [options]
  moesim-engine bench [--out FILE] [options]
  moesim-engine serve REQUESTS.jsonl --out DIR [options]
  moesim-engine --help | --version

common options:
  --backend cpu|cuda        execution backend (default cpu)
  --warmup N                untimed runs per op (default 1)
  --repeats N               timed runs per op (default 3); replay reports an estimator over the
                            clean ones (below), bench the median
  --memory-limit-gib X      cpu backend: memory it may use (default 80% of available RAM)
  --peak-bf16-tflops X      peak figures printed and recorded beside achieved rates
  --peak-fp8-tflops X       (override what the backend reports; cpu reports none)
  --peak-gbps X

replay options:
  --gpus G,G,...            simulated GPUs this single rank plays in turn (default: hottest and
  --ranks G,G,...           coldest by routed tokens, or all when the trace has at most 2 GPUs);
                            --ranks is the same flag
  --layers PROFILE          all | sample | every:N | I,J,... (default all)
  --expert-dtype bf16|fp8   override the routed experts' dtype from the trace
  --max-steps N             replay only the first N steps
  --seed N                  seed of the synthetic weights (default 1)

multi-rank replay (rank r plays GPU r of one replica; the all-to-alls are real and measured):
  --nranks N                number of ranks = GPUs of the replica. With --backend cpu: N threads
                            of this process, one merged --out file, or one process per rank
                            under mpirun -np N (builds with MPI). With cuda: one process per
                            rank, each given --rank (or launched by mpirun -np N)
  --rank R                  this process's rank in [0, N) (default: from OMPI_COMM_WORLD_RANK or
                            PMI_RANK when launched by mpirun)
  --nccl-id-file PATH       shared-file NCCL bootstrap: rank 0 writes the id there, the others
                            wait for it (a fresh path per job, on a file system all ranks see);
                            without it the id goes over MPI (builds with MPI only)
  --local-device D          device ordinal of this rank (default: the launcher's local rank,
                            else R)
  --replica R               the replica the ranks play (default: the trace's first)

replay timing (docs/engine.md, "Timing on a shared machine"):
  --estimator min|median|trimmed_mean
                            what measured_ns reports over the clean samples (default min)
  --max-wait-fraction X     a sample whose threads waited on a run queue longer than X times
                            the sample is noisy and replaced (default 0.1)
  --retries N               extra timed runs per op to replace noisy ones (default: --repeats);
                            an op still short of clean samples is flagged "noisy"
  --pin auto|on|off         pin the threads that run ops (ranks, backend workers) to CPUs of
                            their own; auto: when there are two or more and enough CPUs
  --interleave on|off       on (default): time a step's ops in rounds, one run of each per
                            round, as they run in a step; off: each op's runs back to back
  --out PATH                with one process per rank, PATH must contain {rank}

serve options (serves a request trace in wall-clock time; docs/engine.md "Serving"):
  --out DIR                 writes DIR/steps.jsonl, DIR/requests.csv, then DIR/summary.json
  --layers PROFILE          as for replay (default all)
  --expert-dtype bf16|fp8   as for replay
  --seed N                  seed of the synthetic weights and the routing draws (default 1)
  --max-wall-s X            stop after X seconds of wall time; unfinished requests stay in flight
  (--backend and --memory-limit-gib as above; each replica GPU is a thread of this process)

bench options:
  --shapes tiny|dsv3        layer shapes (default tiny on cpu, dsv3 otherwise)
  --tokens N,N,...          token counts (default 1,16,64 on cpu; 1,16,128,512,2048 otherwise)
  --contexts N,N,...        context lengths (default 256,2048 on cpu; 1024,8192,32768 otherwise)
  --out FILE                also write JSONL records (schema moesim.measurements.v1, mode bench)
)";

using Args = EngineArgs;

// The backend named by --backend. `num_ranks_sharing_memory` ranks in this process split the
// CPU backend's memory limit (--memory-limit-gib or 80% of MemAvailable) equally.
std::unique_ptr<Backend> backend_from(const Args& a, int num_ranks_sharing_memory = 1) {
  BackendOptions options;
  if (const std::optional<double> gib =
          positive_flag(a, "--memory-limit-gib", kMaxMemoryLimitGib)) {
    options.memory_limit_bytes = static_cast<int64_t>(*gib * (1ll << 30));
  }
  if (num_ranks_sharing_memory > 1) {
    options.memory_limit_bytes =
        options.memory_limit_bytes.value_or(cpu::host_available_memory_bytes() / 10 * 8) /
        num_ranks_sharing_memory;
  }
  try {
    return make_backend(a.get("--backend", "cpu"), options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--backend: ") + e.what());
  }
}

DevicePeaks peaks_from(const Args& a, const Backend& backend) {
  DevicePeaks p = backend.peaks();
  if (auto v = positive_flag(a, "--peak-bf16-tflops", kMaxPeakTflops))
    p.bf16_flops_per_s = *v * 1e12;
  if (auto v = positive_flag(a, "--peak-fp8-tflops", kMaxPeakTflops)) p.fp8_flops_per_s = *v * 1e12;
  if (auto v = positive_flag(a, "--peak-gbps", kMaxPeakGbps)) p.memory_bytes_per_s = *v * 1e9;
  return p;
}

// The rank flags of a replay, from the command line.
RankFlags rank_flags_from(const Args& a) {
  RankFlags f;
  f.backend = a.get("--backend", "cpu");
  if (a.has("--rank")) f.rank = int_flag(a, "--rank", 0, 0, kMaxEngineGpus - 1);
  if (a.has("--nranks")) f.nranks = int_flag(a, "--nranks", 1, 1, kMaxEngineGpus);
  if (a.has("--local-device")) f.local_device = int_flag(a, "--local-device", 0, 0, 1023);
  f.nccl_id_file = a.get("--nccl-id-file", "");
  f.gpus_given = a.has("--gpus") || a.has("--ranks");
  f.replica_given = a.has("--replica");
  return f;
}

// The exit code of a failed command. Under mpirun the other ranks would wait forever in their
// next collective: the error (already printed) ends the whole job.
int failed(int exit_code) {
  std::cerr.flush();
  abort_mpi_job(exit_code);
  return exit_code;
}

// Opens the --out file. One that cannot be opened (a missing directory, no permission) is a bad
// output path, as for moesim: InputError (exit 2) with errno's reason.
void open_output(std::ofstream& out, const std::string& path) {
  errno = 0;
  out.open(path);
  if (!out) {
    throw InputError("cannot write " + path + ": " + std::strerror(errno != 0 ? errno : EIO));
  }
}

// Closes the --out file; false (the path and errno's reason printed) when a write failed, e.g.
// a full disk: exit 1.
bool close_output(std::ofstream& out, const std::string& path) {
  errno = 0;
  out.close();
  if (out) return true;
  std::cerr << "moesim-engine: error writing " << path << ": "
            << std::strerror(errno != 0 ? errno : EIO) << "\n";
  return false;
}

int run_replay(const Args& a) {
  const RankPlan plan =
      plan_ranks(rank_flags_from(a), launcher_rank_from_env(std::getenv), have_mpi());
  ReplayOptions o;
  const std::string gpu_flag = a.has("--ranks") ? "--ranks" : "--gpus";
  if (a.has(gpu_flag)) {
    for (int64_t g : int_list_flag(a, gpu_flag, "", 0, kMaxEngineGpus - 1)) {
      o.gpus.push_back(static_cast<int32_t>(g));
    }
  }
  o.layers = a.get("--layers", "all");
  o.warmup = static_cast<int>(int_flag(a, "--warmup", 1, 0, kMaxEngineRuns));
  o.repeats = static_cast<int>(int_flag(a, "--repeats", 3, 1, kMaxEngineRuns));
  o.seed = static_cast<uint64_t>(int_flag(a, "--seed", 1, 0, INT64_MAX));
  o.expert_dtype = a.get("--expert-dtype", "");
  o.max_steps = int_flag(a, "--max-steps", -1, 0, INT64_MAX);
  o.replica_idx = int_flag(a, "--replica", -1, 0, kMaxEngineGpus - 1);
  o.timing.estimator = *parse_estimator(a.get("--estimator", "min"));
  o.timing.max_wait_fraction =
      positive_flag(a, "--max-wait-fraction", kMaxWaitFraction).value_or(0.1);
  o.timing.max_extra_runs = static_cast<int>(int_flag(a, "--retries", -1, 0, kMaxEngineRuns));
  o.timing.pin = *parse_pin_mode(a.get("--pin", "auto"));
  o.interleave = a.get("--interleave", "on") == "on";
  o.engine_version = MOESIM_VERSION;
  const StepTrace trace = read_step_trace(a.trace_path);
  const std::vector<std::string> unsupported = shape_limit_violations(
      trace.model, a.get("--backend", "cpu"), replay_dtypes(trace.model.dtypes, o.expert_dtype));
  if (!unsupported.empty()) {
    std::string msg = a.trace_path + ": the " + a.get("--backend", "cpu") +
                      " backend cannot run this model's shapes and dtypes:";
    for (const std::string& u : unsupported) msg += "\n  " + u;
    throw InputError(msg);
  }
  const std::string out_path = rank_output_path(a.get("--out", ""), plan);

  // Threads: every rank's backend is created on its thread; nothing to open before the file.
  MpiSession mpi(plan.use_mpi_bootstrap);  // outlives the backend (declared first)
  std::unique_ptr<Backend> backend;
  if (plan.mode != RankMode::kThreads) {
    backend = backend_from(a);
    if (plan.mode == RankMode::kProcessPerRank) {
      DistributedConfig config = plan.config;
      // The CPU backend exchanges through MPI itself; CUDA bootstraps NCCL (file or MPI).
      if (backend->name() == "cpu") config.communicator = make_mpi_communicator();
      backend->init_distributed(config);
    }
    const bool per_rank = plan.mode == RankMode::kProcessPerRank;
    o.timing.pinned =
        pin_op_threads(o.timing.pin, per_rank ? plan.config.rank : 0,
                       per_rank ? plan.config.world_size : 1, backend->worker_thread_ids());
  }
  std::ofstream out;
  open_output(out, out_path);
  MeasurementWriter writer(out);
  ReplaySummary s;
  std::string where;
  if (plan.mode == RankMode::kThreads) {
    s = replay_trace_in_process(
        trace, o, plan.config.world_size,
        [&](int) { return backend_from(a, plan.config.world_size); }, writer);
    where = std::to_string(plan.config.world_size) + " in-process ranks on " +
            a.get("--backend", "cpu");
  } else {
    s = replay_trace(*backend, trace, o, writer);
    where = backend->name() + " (" + backend->device_name() + ")";
    if (plan.mode == RankMode::kProcessPerRank) {
      where = "rank " + std::to_string(backend->rank()) + "/" +
              std::to_string(backend->world_size()) + " on " + where;
    }
  }
  if (!close_output(out, out_path)) return failed(1);
  std::cout << "replayed " << s.num_steps << " steps x " << s.gpus.size() << " GPUs x "
            << s.layers.size() << " layers on " << where << ": " << s.num_op_records
            << " op records -> " << out_path << "\n";
  if (trace.overlap != "none") {
    std::cout << "note: the trace was simulated with overlap = \"" << trace.overlap
              << "\"; the engine replays each layer's ops in sequence, without micro-batch "
                 "overlap (moesim validate composes the measured ops with the recorded "
                 "schedule)\n";
  }
  return 0;
}

int run_bench_command(const Args& a) {
  std::unique_ptr<Backend> backend = backend_from(a);
  const bool cpu = backend->name() == "cpu";
  BenchOptions o;
  o.shapes = a.get("--shapes", cpu ? "tiny" : "dsv3");
  o.tokens =
      int_list_flag(a, "--tokens", cpu ? "1,16,64" : "1,16,128,512,2048", 1, kMaxBenchTokens);
  o.contexts = int_list_flag(a, "--contexts", cpu ? "256,2048" : "1024,8192,32768", 0,
                             kMaxBenchContextTokens);
  o.warmup = static_cast<int>(int_flag(a, "--warmup", 1, 0, kMaxEngineRuns));
  o.repeats = static_cast<int>(int_flag(a, "--repeats", 3, 1, kMaxEngineRuns));
  o.peaks = peaks_from(a, *backend);
  o.engine_version = MOESIM_VERSION;
  std::ofstream out;
  if (a.has("--out")) open_output(out, a.get("--out", ""));
  run_bench(*backend, o, std::cout, a.has("--out") ? &out : nullptr);
  return a.has("--out") && !close_output(out, a.get("--out", "")) ? 1 : 0;
}

int main_impl(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--version") {
      std::cout << "moesim-engine " << MOESIM_VERSION << " (backends:";
      for (const std::string& n : backend_names()) std::cout << ' ' << n;
      std::cout << ")\n";
      return 0;
    }
  }
  try {
    const Args a = parse_engine_args(std::vector<std::string>(argv + 1, argv + argc));
    if (a.command == "serve") {
      const int code = serve::run_serve_command(
          a, [&](int num_ranks) { return backend_from(a, num_ranks); }, std::cout);
      return code == 0 ? 0 : failed(code);
    }
    return a.command == "replay" ? run_replay(a) : run_bench_command(a);
  } catch (const UsageError& e) {
    // The one line that matters; the usage text is one flag away.
    std::cerr << "moesim-engine: " << e.what() << " (see moesim-engine --help)\n";
    return failed(2);
  } catch (const InputError& e) {
    std::cerr << "moesim-engine: " << e.what() << "\n";
    return failed(2);
  } catch (const OutOfMemoryError& e) {
    std::cerr << "moesim-engine: " << e.what() << "\n";
    return failed(1);
  } catch (const BackendUnavailableError& e) {
    std::cerr << "moesim-engine: " << e.what() << "\n";
    return failed(1);
  } catch (const std::exception& e) {
    // Device and library failures (CudaError: file:line, call, error name) and the like.
    std::cerr << "moesim-engine: error: " << e.what() << "\n";
    return failed(1);
  }
}

}  // namespace
}  // namespace moesim::engine

int main(int argc, char** argv) { return moesim::engine::main_impl(argc, argv); }

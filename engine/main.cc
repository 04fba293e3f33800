// moesim-engine: replays recorded simulator steps on a backend and measures them, or benchmarks
// each operation. Exit codes: 0 success; 1 runtime failure (out of memory, backend unavailable,
// cannot write output); 2 usage or input error (bad flags, malformed or mismatched trace).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
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
#include "engine/replay.h"
#include "engine/replay_plan.h"
#include "engine/shape_limits.h"
#include "engine/step_trace.h"
#include "moesim_version.h"

namespace moesim::engine {
namespace {

constexpr const char* kUsage = R"(usage:
  moesim-engine replay STEPS.jsonl --out MEAS.jsonl [options]
  moesim-engine bench [--out FILE] [options]
  moesim-engine --help | --version

common options:
  --backend cpu|cuda        execution backend (default cpu)
  --warmup N                untimed runs per op (default 1)
  --repeats N               timed runs per op; the median is reported (default 3)
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
  --out PATH                with one process per rank, PATH must contain {rank}

bench options:
  --shapes tiny|dsv3        layer shapes (default tiny on cpu, dsv3 otherwise)
  --tokens N,N,...          token counts (default 1,16,64 on cpu; 1,16,128,512,2048 otherwise)
  --contexts N,N,...        context lengths (default 256,2048 on cpu; 1024,8192,32768 otherwise)
  --out FILE                also write JSONL records (schema moesim.measurements.v1, mode bench)
)";

class UsageError : public InputError {
 public:
  using InputError::InputError;
};

struct Args {
  std::string command;
  std::string trace_path;
  std::map<std::string, std::string> flags;

  bool has(const std::string& k) const { return flags.count(k) > 0; }
  std::string get(const std::string& k, const std::string& fallback) const {
    auto it = flags.find(k);
    return it == flags.end() ? fallback : it->second;
  }
};

const std::vector<std::string> kFlags = {"--backend",
                                         "--warmup",
                                         "--repeats",
                                         "--memory-limit-gib",
                                         "--peak-bf16-tflops",
                                         "--peak-fp8-tflops",
                                         "--peak-gbps",
                                         "--gpus",
                                         "--layers",
                                         "--expert-dtype",
                                         "--max-steps",
                                         "--seed",
                                         "--shapes",
                                         "--tokens",
                                         "--contexts",
                                         "--out",
                                         "--ranks",
                                         "--rank",
                                         "--nranks",
                                         "--nccl-id-file",
                                         "--local-device",
                                         "--replica"};

const std::vector<std::string> kMultiRankFlags = {"--rank",         "--nranks",  "--nccl-id-file",
                                                  "--local-device", "--replica", "--ranks"};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      if (std::find(kFlags.begin(), kFlags.end(), arg) == kFlags.end()) {
        throw UsageError("unknown option " + arg);
      }
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      a.flags[arg] = argv[++i];
    } else if (a.command.empty()) {
      a.command = arg;
    } else if (a.command == "replay" && a.trace_path.empty()) {
      a.trace_path = arg;
    } else {
      throw UsageError("unexpected argument '" + arg + "'");
    }
  }
  return a;
}

int64_t parse_int(const std::string& flag, const std::string& v, int64_t min_value) {
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty()) throw UsageError(flag + " " + v + ": expected an integer");
  if (x < min_value) throw UsageError(flag + " " + v + ": must be >= " + std::to_string(min_value));
  return x;
}

double parse_positive(const std::string& flag, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !(x > 0)) throw UsageError(flag + " " + v + ": expected a number > 0");
  return x;
}

std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& v, int64_t min) {
  std::vector<int64_t> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_int(flag, item, min));
  if (out.empty()) throw UsageError(flag + ": empty list");
  return out;
}

// The backend named by --backend. `num_ranks_sharing_memory` ranks in this process split the
// CPU backend's memory limit (--memory-limit-gib or 80% of MemAvailable) equally.
std::unique_ptr<Backend> backend_from(const Args& a, int num_ranks_sharing_memory = 1) {
  BackendOptions options;
  if (a.has("--memory-limit-gib")) {
    options.memory_limit_bytes = static_cast<int64_t>(
        parse_positive("--memory-limit-gib", a.get("--memory-limit-gib", "")) * (1ll << 30));
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
  if (a.has("--peak-bf16-tflops")) {
    p.bf16_flops_per_s =
        parse_positive("--peak-bf16-tflops", a.get("--peak-bf16-tflops", "")) * 1e12;
  }
  if (a.has("--peak-fp8-tflops")) {
    p.fp8_flops_per_s = parse_positive("--peak-fp8-tflops", a.get("--peak-fp8-tflops", "")) * 1e12;
  }
  if (a.has("--peak-gbps")) {
    p.memory_bytes_per_s = parse_positive("--peak-gbps", a.get("--peak-gbps", "")) * 1e9;
  }
  return p;
}

// The rank flags of a replay, from the command line.
RankFlags rank_flags_from(const Args& a) {
  RankFlags f;
  f.backend = a.get("--backend", "cpu");
  if (a.has("--rank")) f.rank = parse_int("--rank", a.get("--rank", ""), 0);
  if (a.has("--nranks")) f.nranks = parse_int("--nranks", a.get("--nranks", ""), 1);
  if (a.has("--local-device")) {
    f.local_device = parse_int("--local-device", a.get("--local-device", ""), 0);
  }
  f.nccl_id_file = a.get("--nccl-id-file", "");
  if (a.has("--nccl-id-file") && f.nccl_id_file.empty()) {
    throw UsageError("--nccl-id-file: empty path");
  }
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

int run_replay(const Args& a) {
  if (a.trace_path.empty()) throw UsageError("replay needs a STEPS.jsonl argument");
  if (!a.has("--out")) throw UsageError("replay needs --out MEAS.jsonl");
  for (const char* f : {"--shapes", "--tokens", "--contexts"}) {
    if (a.has(f)) throw UsageError(std::string(f) + " is a bench option");
  }
  if (a.has("--gpus") && a.has("--ranks")) {
    throw UsageError("--gpus and --ranks are the same option; give one");
  }
  const RankPlan plan =
      plan_ranks(rank_flags_from(a), launcher_rank_from_env(std::getenv), have_mpi());
  ReplayOptions o;
  const std::string gpu_flag = a.has("--ranks") ? "--ranks" : "--gpus";
  if (a.has(gpu_flag)) {
    for (int64_t g : parse_int_list(gpu_flag, a.get(gpu_flag, ""), 0)) {
      o.gpus.push_back(static_cast<int32_t>(g));
    }
  }
  o.layers = a.get("--layers", "all");
  o.warmup = static_cast<int>(parse_int("--warmup", a.get("--warmup", "1"), 0));
  o.repeats = static_cast<int>(parse_int("--repeats", a.get("--repeats", "3"), 1));
  o.seed = static_cast<uint64_t>(parse_int("--seed", a.get("--seed", "1"), 0));
  o.expert_dtype = a.get("--expert-dtype", "");
  o.max_steps = a.has("--max-steps") ? parse_int("--max-steps", a.get("--max-steps", ""), 0) : -1;
  o.replica_idx = a.has("--replica") ? parse_int("--replica", a.get("--replica", ""), 0) : -1;
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
  }
  std::ofstream out(out_path);
  if (!out) {
    std::cerr << "moesim-engine: cannot write " << out_path << "\n";
    return failed(1);
  }
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
  out.close();
  if (!out) {
    std::cerr << "moesim-engine: error writing " << out_path << "\n";
    return failed(1);
  }
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
  for (const char* f : {"--gpus", "--layers", "--expert-dtype", "--max-steps", "--seed"}) {
    if (a.has(f)) throw UsageError(std::string(f) + " is a replay option");
  }
  for (const std::string& f : kMultiRankFlags) {
    if (a.has(f)) throw UsageError(f + " is a replay option");
  }
  std::unique_ptr<Backend> backend = backend_from(a);
  const bool cpu = backend->name() == "cpu";
  BenchOptions o;
  o.shapes = a.get("--shapes", cpu ? "tiny" : "dsv3");
  o.tokens =
      parse_int_list("--tokens", a.get("--tokens", cpu ? "1,16,64" : "1,16,128,512,2048"), 1);
  o.contexts =
      parse_int_list("--contexts", a.get("--contexts", cpu ? "256,2048" : "1024,8192,32768"), 0);
  o.warmup = static_cast<int>(parse_int("--warmup", a.get("--warmup", "1"), 0));
  o.repeats = static_cast<int>(parse_int("--repeats", a.get("--repeats", "3"), 1));
  o.peaks = peaks_from(a, *backend);
  o.engine_version = MOESIM_VERSION;
  std::ofstream out;
  if (a.has("--out")) {
    out.open(a.get("--out", ""));
    if (!out) {
      std::cerr << "moesim-engine: cannot write " << a.get("--out", "") << "\n";
      return 1;
    }
  }
  run_bench(*backend, o, std::cout, a.has("--out") ? &out : nullptr);
  return 0;
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
    const Args a = parse_args(argc, argv);
    if (a.command == "replay") return run_replay(a);
    if (a.command == "bench") return run_bench_command(a);
    throw UsageError(a.command.empty() ? "missing command" : "unknown command '" + a.command + "'");
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

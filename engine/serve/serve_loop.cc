#include "engine/serve/serve_loop.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "base/check.h"
#include "engine/communicator.h"
#include "engine/cpu/thread_communicator.h"
#include "engine/gpu_executor.h"
#include "engine/input_error.h"
#include "engine/replay_plan.h"
#include "engine/serve/share_routing.h"
#include "engine/serve/step_board.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace moesim::engine::serve {

namespace {

using Clock = std::chrono::steady_clock;

// The largest step one GPU of a replica served with `config` can be given (the executor's
// buffers are sized once from it).
GpuExtents serve_extents(const SchedulerConfig& config, int64_t max_top_k, int64_t num_ranks) {
  GpuExtents x;
  int64_t tokens = config.max_batch_tokens_per_gpu;
  if (config.max_step_tokens > 0) tokens = std::min(tokens, config.max_step_tokens);
  const int64_t seqs = std::min(config.max_seqs, tokens);
  // Every sequence of a rank holds its KV in the rank's pool, so the rows one attention call reads
  // are at most the pool's tokens (and at most max_seqs sequences of the longest context).
  int64_t rows = config.kv_blocks_per_rank * config.kv_block_tokens;
  if (config.max_context_tokens > 0) {
    rows = std::min(rows, config.max_seqs * config.max_context_tokens);
  }
  x.max_tokens = tokens;
  x.max_prefill_sequences = seqs;
  x.max_decode_sequences = seqs;
  x.max_prefill_cache_rows = rows;
  x.max_decode_cache_rows = rows;
  x.max_sent_rows = tokens * max_top_k;
  x.max_received_rows = num_ranks * tokens * max_top_k;
  return x;
}

int64_t max_top_k(const TraceModel& model) {
  int64_t k = 0;
  for (const TraceLayer& l : model.layers) {
    if (l.is_moe) k = std::max(k, l.top_k);
  }
  return k;
}

void check_servable(const ServeInput& input) {
  MOESIM_CHECK(input.deployment != nullptr, "serve: no deployment");
  const StepTrace& d = *input.deployment;
  for (const TraceReplica& r : d.replicas) {
    if (r.attention == "tp" && r.attention_tp > 1) {
      throw InputError(d.file + ": replicas[" + std::to_string(r.replica_idx) + "]: attention tp " +
                       std::to_string(r.attention_tp) +
                       " is not served yet (data-parallel attention only)");
    }
  }
  int64_t moe_layers = 0;
  for (const TraceLayer& l : d.model.layers) {
    if (!l.is_moe) continue;
    if (!input.expert_share.empty()) {
      if (moe_layers >= static_cast<int64_t>(input.expert_share.size()) ||
          static_cast<int64_t>(input.expert_share[moe_layers].size()) != l.num_routed_experts) {
        throw InputError(d.file + ": routing.expert_share: layer " + std::to_string(l.layer_idx) +
                         " needs one share per routed expert");
      }
    }
    ++moe_layers;
  }
  if (!input.expert_share.empty() &&
      static_cast<int64_t>(input.expert_share.size()) != moe_layers) {
    throw InputError(d.file +
                     ": routing.expert_share: " + std::to_string(input.expert_share.size()) +
                     " layers, the model has " + std::to_string(moe_layers) + " MoE layers");
  }
}

// State shared by every rank thread.
struct Shared {
  Shared(const ServeInput& in, const ServeOptions& opt, ServeFront f, std::ostream& out)
      : input(in), options(opt), front(std::move(f)), steps_out(out) {}

  const ServeInput& input;
  const ServeOptions& options;
  std::mutex mutex;
  std::condition_variable changed;
  ServeFront front;
  size_t next_arrival = 0;
  std::vector<RequestRecord> records;   // arrival order
  std::map<int64_t, size_t> record_of;  // request id -> index
  std::ostream& steps_out;
  int64_t num_steps = 0;
  Clock::time_point start;
  bool stopping = false;  // max wall time reached or a rank failed
  int total_ranks = 0;
  int ready_ranks = 0;  // ranks past their warm-up; the clock starts when all are

  // Called by every rank once warmed up: waits for the others and starts the clock with the
  // last one. False when the run is stopping (a rank failed).
  bool ready_and_wait() {
    std::unique_lock<std::mutex> lock(mutex);
    if (++ready_ranks == total_ranks) {
      start = Clock::now();
      changed.notify_all();
    }
    changed.wait(lock, [&] { return stopping || ready_ranks == total_ranks; });
    return !stopping;
  }

  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  }

  // Routes every arrival due by `now` (mutex held).
  void inject(int64_t now) {
    bool any = false;
    while (next_arrival < input.arrivals.size() &&
           input.arrivals[next_arrival].arrival.request.arrival_ns <= now) {
      const ArrivalDecision d = front.arrive(input.arrivals[next_arrival].arrival);
      RequestRecord& r = records[next_arrival];
      r.replica = d.replica;
      if (!d.queued()) {
        r.outcome = "rejected";
        r.reject_reason = d.reject_reason;
      }
      ++next_arrival;
      any = true;
    }
    if (any) changed.notify_all();
  }

  // When the next arrival is due (ns), or INT64_MAX when every arrival has been routed.
  int64_t next_arrival_ns() const {
    return next_arrival < input.arrivals.size()
               ? input.arrivals[next_arrival].arrival.request.arrival_ns
               : std::numeric_limits<int64_t>::max();
  }
};

// The step of replica `replica` described by `plan`, with routing drawn for every MoE layer.
TraceStep make_step(const ServeInput& input, const TraceReplica& replica, int64_t step_idx,
                    const StepPlan& plan, uint64_t seed) {
  const StepTrace& d = *input.deployment;
  TraceStep step;
  step.step_idx = step_idx;
  step.replica_idx = replica.replica_idx;
  TokensPerGpu tokens;
  for (const PlannedSequence& s : plan.sequences) {
    TraceSequence t;
    t.request_id = s.request_id;
    t.gpu = replica.gpus.at(s.rank);
    t.phase = s.prefill ? Phase::kPrefill : Phase::kDecode;
    t.new_tokens = s.new_tokens;
    t.context_tokens = s.context_tokens;
    step.sequences.push_back(t);
    auto it =
        std::find_if(tokens.begin(), tokens.end(), [&](const auto& p) { return p.first == t.gpu; });
    if (it == tokens.end()) {
      tokens.emplace_back(t.gpu, s.new_tokens);
    } else {
      it->second += s.new_tokens;
    }
  }
  int64_t moe_idx = 0;
  for (const TraceLayer& l : d.model.layers) {
    if (!l.is_moe) continue;
    TraceMoeLayer m;
    m.layer_idx = l.layer_idx;
    const std::vector<double> uniform(l.num_routed_experts, 1.0);
    const std::vector<double>& share =
        input.expert_share.empty() ? uniform : input.expert_share[moe_idx];
    m.routing = sample_share_routing(
        share, l.top_k, tokens, d.placement_at(replica.replica_idx, step_idx, l.layer_idx),
        replica.gpus,
        routing_seed(seed ^ static_cast<uint64_t>(replica.replica_idx), step_idx, l.layer_idx));
    step.moe_layers.push_back(std::move(m));
    ++moe_idx;
  }
  return step;
}

// What one rank thread leaves behind.
struct RankResult {
  std::exception_ptr error;
  bool aborted = false;
  std::string backend, device;
};

class ReplicaRanks {
 public:
  ReplicaRanks(const TraceReplica& replica, int first_thread_rank)
      : replica_(replica),
        first_(first_thread_rank),
        board_(static_cast<int>(replica.gpus.size())) {
    if (replica.gpus.size() > 1) {
      communicators_ = cpu::make_thread_communicators(static_cast<int>(replica.gpus.size()));
    }
  }
  const TraceReplica& replica() const { return replica_; }
  int first_thread_rank() const { return first_; }
  int num_ranks() const { return static_cast<int>(replica_.gpus.size()); }
  StepBoard& board() { return board_; }
  std::shared_ptr<Communicator> communicator(int rank) const {
    return communicators_.empty() ? nullptr : communicators_[rank];
  }
  void abort() {
    board_.abort();
    if (!communicators_.empty()) cpu::abort_thread_group(*communicators_.front());
  }

 private:
  const TraceReplica& replica_;
  int first_;
  StepBoard board_;
  std::vector<std::shared_ptr<Communicator>> communicators_;
};

// The driver's loop: plan, post, run, wait, apply; until nothing is left for this replica.
void drive(Shared& shared, ReplicaRanks& ranks, int64_t replica_pos, GpuExecutor& executor,
           Backend& backend) {
  const TraceReplica& replica = ranks.replica();
  int64_t step_idx = 0;
  while (true) {
    StepPlan plan;
    int64_t start_ns = 0;
    {
      std::unique_lock<std::mutex> lock(shared.mutex);
      while (true) {
        const int64_t now = shared.now_ns();
        if (shared.options.max_wall_ns > 0 && now >= shared.options.max_wall_ns) {
          shared.stopping = true;
        }
        if (shared.stopping) break;
        shared.inject(now);
        Scheduler& scheduler = shared.front.scheduler(replica_pos);
        plan = scheduler.plan_step();
        if (!plan.empty()) {
          start_ns = now;
          break;
        }
        const int64_t next = shared.next_arrival_ns();
        if (next == std::numeric_limits<int64_t>::max() && scheduler.idle()) break;
        // Idle: sleep until the next arrival is due or another replica routes one here.
        int64_t wake = next;
        if (shared.options.max_wall_ns > 0) wake = std::min(wake, shared.options.max_wall_ns);
        if (wake == std::numeric_limits<int64_t>::max()) {
          shared.changed.wait(lock);
        } else {
          shared.changed.wait_until(lock, shared.start + std::chrono::nanoseconds(wake));
        }
      }
      if (plan.empty()) break;
      for (int64_t id : plan.admitted) {
        RequestRecord& r = shared.records[shared.record_of.at(id)];
        if (r.first_scheduled_ns < 0) r.first_scheduled_ns = start_ns;
      }
      for (int64_t id : plan.preempted) ++shared.records[shared.record_of.at(id)].preemptions;
    }
    const TraceStep step = make_step(shared.input, replica, step_idx, plan, shared.options.seed);
    ranks.board().post(&step);
    executor.run_step(step);
    backend.synchronize();
    ranks.board().done();
    ranks.board().wait_all_done();
    {
      std::lock_guard<std::mutex> lock(shared.mutex);
      const int64_t end_ns = shared.now_ns();
      const StepOutcome outcome = shared.front.scheduler(replica_pos).finish_step(plan);
      StepLogRecord log;
      log.step_idx = step_idx;
      log.replica = replica.replica_idx;
      log.start_ns = start_ns;
      log.end_ns = end_ns;
      log.preempted = plan.preempted;
      for (const PlannedSequence& s : plan.sequences) {
        log.sequences.push_back(StepSequenceRecord{s.request_id, s.rank, s.prefill, s.new_tokens,
                                                   s.context_tokens, s.emits_token});
        if (s.emits_token) ++shared.records[shared.record_of.at(s.request_id)].generated_tokens;
      }
      for (int64_t id : outcome.first_token) {
        RequestRecord& r = shared.records[shared.record_of.at(id)];
        if (r.first_token_ns < 0) r.first_token_ns = end_ns;
      }
      for (int64_t id : outcome.finished) {
        RequestRecord& r = shared.records[shared.record_of.at(id)];
        r.done_ns = end_ns;
        r.outcome = "completed";
      }
      write_step_log_record(shared.steps_out, log);
      ++shared.num_steps;
      shared.changed.notify_all();
    }
    ++step_idx;
  }
  ranks.board().post(nullptr);
}

void run_rank(Shared& shared, ReplicaRanks& ranks, int64_t replica_pos, int rank, int total_ranks,
              const ServeBackendFactory& make_backend, RankResult& result) {
  try {
#ifdef _OPENMP
    // The ranks are this process's parallelism: each gets an equal share of the cores for its
    // GEMMs unless OMP_NUM_THREADS says otherwise (oversubscribed OpenMP teams spin-wait on
    // each other: 10x slower steps on 2 cores).
    if (std::getenv("OMP_NUM_THREADS") == nullptr) {
      omp_set_num_threads(std::max(1, omp_get_num_procs() / total_ranks));
    }
#endif
    std::unique_ptr<Backend> backend = make_backend(ranks.first_thread_rank() + rank, total_ranks);
    result.backend = backend->name();
    result.device = backend->device_name();
    if (ranks.num_ranks() > 1) {
      DistributedConfig config;
      config.rank = rank;
      config.world_size = ranks.num_ranks();
      config.communicator = ranks.communicator(rank);
      backend->init_distributed(config);
    }
    const StepTrace& d = *shared.input.deployment;
    const std::vector<LayerRun> layers = select_layers(shared.options.layers, d.model);
    const ReplayDtypes dtypes =
        resolve_dtypes(d.model.dtypes, *backend, shared.options.expert_dtype);
    const int32_t gpu = ranks.replica().gpus.at(rank);
    const GpuExtents extents = serve_extents(shared.front.scheduler(replica_pos).config(),
                                             max_top_k(d.model), ranks.num_ranks());
    const ReplayMemoryPlan plan = plan_memory(d, layers, gpu, dtypes, extents);
    // hidden x vocab x element bytes: within int64 by the reader's bounds (2^17 x 2^22 x 4).
    const int64_t head_bytes =
        d.model.hidden_size * lm_head_vocab(d, gpu) * dtype_size_bytes(dtypes.activations);
    int64_t needed_bytes = 0;
    if (__builtin_add_overflow(plan.total_bytes(), head_bytes, &needed_bytes)) {
      needed_bytes = std::numeric_limits<int64_t>::max();
    }
    const MemoryInfo mem = backend->memory_info();
    if (needed_bytes > mem.available_bytes) {
      throw OutOfMemoryError("serving simulated GPU " + std::to_string(gpu) + " (weights " +
                                 std::to_string(plan.weight_bytes) + " B, output head " +
                                 std::to_string(head_bytes) + " B, caches " +
                                 std::to_string(plan.cache_bytes) + " B, activations " +
                                 std::to_string(plan.activation_bytes) + " B)",
                             needed_bytes, mem.available_bytes);
    }
    ExecutorOptions executor_options;
    executor_options.timed = false;
    executor_options.seed = shared.options.seed;
    GpuExecutor executor(*backend, d, layers, dtypes, gpu, extents, executor_options, nullptr);
    // Warm-up before the clock starts, as engines warm up before they take traffic: one step
    // with a full prefill chunk on every rank of the replica (each rank builds the same step),
    // which touches every buffer and runs every op and collective once.
    StepPlan warmup;
    for (int32_t r = 0; r < ranks.num_ranks(); ++r) {
      warmup.sequences.push_back(PlannedSequence{
          -1 - r, r, true, std::min(extents.max_tokens, extents.max_prefill_cache_rows), 0, true});
    }
    executor.run_step(make_step(shared.input, ranks.replica(), 0, warmup, shared.options.seed));
    backend->synchronize();
    if (!shared.ready_and_wait()) return;
    if (rank == 0) {
      drive(shared, ranks, replica_pos, executor, *backend);
      return;
    }
    int64_t seen = 0;
    while (const TraceStep* step = ranks.board().take(seen)) {
      executor.run_step(*step);
      backend->synchronize();
      ranks.board().done();
    }
  } catch (const CommunicatorAbortedError&) {
    result.aborted = true;
  } catch (...) {
    result.error = std::current_exception();
    {
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.stopping = true;
      shared.changed.notify_all();
    }
    ranks.abort();
  }
}

}  // namespace

ServeResult serve_requests(const ServeInput& input, const ServeOptions& options,
                           const ServeBackendFactory& make_backend, std::ostream& steps_out) {
  check_servable(input);
  const StepTrace& d = *input.deployment;
  std::vector<int64_t> num_ranks;
  for (const TraceReplica& r : d.replicas) num_ranks.push_back(static_cast<int64_t>(r.gpus.size()));
  ServeFront front = [&] {
    try {
      return ServeFront(input.admission, input.scheduler, num_ranks);
    } catch (const std::invalid_argument& e) {
      throw InputError(d.file + ": " + e.what());
    }
  }();
  Shared shared(input, options, std::move(front), steps_out);
  shared.records.resize(input.arrivals.size());
  for (size_t i = 0; i < input.arrivals.size(); ++i) {
    const ServedArrival& a = input.arrivals[i];
    RequestRecord& r = shared.records[i];
    r.request_id = a.arrival.request.request_id;
    r.session_id = a.arrival.session_id;
    r.turn_idx = a.turn_idx;
    r.domain = a.domain;
    r.arrival_ns = a.arrival.request.arrival_ns;
    r.prompt_tokens = a.arrival.request.prompt_tokens;
    r.output_tokens = a.arrival.request.output_tokens;
    if (!shared.record_of.emplace(r.request_id, i).second) {
      throw InputError(d.file + ": request_id " + std::to_string(r.request_id) + " repeats");
    }
  }
  std::vector<std::unique_ptr<ReplicaRanks>> replicas;
  int total = 0;
  for (const TraceReplica& r : d.replicas) {
    replicas.push_back(std::make_unique<ReplicaRanks>(r, total));
    total += static_cast<int>(r.gpus.size());
  }
  std::vector<RankResult> results(total);
  std::vector<std::thread> threads;
  shared.total_ranks = total;
  for (size_t p = 0; p < replicas.size(); ++p) {
    for (int rank = 0; rank < replicas[p]->num_ranks(); ++rank) {
      threads.emplace_back(run_rank, std::ref(shared), std::ref(*replicas[p]),
                           static_cast<int64_t>(p), rank, total, std::cref(make_backend),
                           std::ref(results[replicas[p]->first_thread_rank() + rank]));
    }
  }
  for (std::thread& t : threads) t.join();
  for (const RankResult& r : results) {
    if (r.error) std::rethrow_exception(r.error);
  }
  ServeResult out;
  out.wall_ns = shared.now_ns();
  out.requests = std::move(shared.records);
  out.num_steps = shared.num_steps;
  out.backend = results.front().backend;
  out.device = results.front().device;
  return out;
}

}  // namespace moesim::engine::serve

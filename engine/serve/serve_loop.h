// The serving loop of `moesim-engine serve`: requests are injected at their arrival times in wall
// clock, routed and scheduled by the engine's own front and continuous-batching schedulers
// (engine/serve/admission.h, scheduler.h), and every step runs for real on the backend: each
// replica's GPUs are ranks (threads of this process on the CPU backend, joined by an in-process
// communicator), each playing its share of the step's layers with real all-to-alls of the
// tokens (engine/gpu_executor.h, untimed: the loop times whole steps). The replica's rank 0 is
// its driver: it plans a step, posts it to the other ranks (engine/serve/step_board.h), runs its
// own share, waits for the last rank, stamps the step's end and applies it to the scheduler.
// Output length is forced: a request generates exactly its output_tokens.
//
// Times: ns of a steady clock from the loop's start, which is the request trace's time 0. A
// request arriving during a step is routed at the next step boundary of any replica (or when an
// idle replica wakes for it), as a real engine admits only between steps; its queueing counts
// from its arrival time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/serve/admission.h"
#include "engine/serve/serve_records.h"
#include "engine/step_trace.h"

namespace moesim::engine::serve {

// One arrival of the request trace.
struct ServedArrival {
  Arrival arrival;  // request and session
  int64_t turn_idx = 0;
  std::string domain;
};

struct ServeInput {
  // Model, topology, replicas and placement (its steps are not used); must outlive the loop.
  const StepTrace* deployment = nullptr;
  SchedulerConfig scheduler;
  AdmissionConfig admission;
  // Per MoE layer (model order), each routed expert's share of selections; empty: uniform.
  std::vector<std::vector<double>> expert_share;
  std::vector<ServedArrival> arrivals;  // arrival order
};

struct ServeOptions {
  std::string layers = "all";  // layer profile (engine/replay_plan.h select_layers)
  std::string expert_dtype;    // "" = from the trace; "bf16" or "fp8"
  uint64_t seed = 1;           // synthetic weights and routing draws
  // Stop injecting and serving after this much wall time (ns; <= 0: serve every request to
  // completion). Requests not done then stay in_flight in the records.
  int64_t max_wall_ns = 0;
};

// Creates the backend of `rank` (of `num_ranks` in this process), on that rank's thread.
using ServeBackendFactory = std::function<std::unique_ptr<Backend>(int rank, int num_ranks)>;

struct ServeResult {
  std::vector<RequestRecord> requests;  // arrival order
  int64_t num_steps = 0;                // over all replicas
  int64_t wall_ns = 0;
  std::string backend;
  std::string device;
};

// Serves `input` and writes one step record per executed step to `steps_out` (engine/serve/
// serve_records.h). Throws InputError when the deployment cannot be served (attention TP,
// unsupported dtypes, shares that do not match the model), OutOfMemoryError when a GPU's weights,
// caches and activations exceed the backend's memory, and rethrows the first rank's error.
ServeResult serve_requests(const ServeInput& input, const ServeOptions& options,
                           const ServeBackendFactory& make_backend, std::ostream& steps_out);

}  // namespace moesim::engine::serve

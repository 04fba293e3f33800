// A workload model fitted from a trace window, and a sampler that generates sustained traffic
// from it at any rate (replay = "model", docs/workload.md).
//
// The unit is the session: rows linked by a private (not shared, trace_window.h) hash id are one
// conversation, so resampling whole sessions keeps each request's (prompt, output) pair, the
// reuse inside a conversation and its think times, while every drawn session gets fresh ids for
// its private blocks (no spurious hits between copies). Session starts follow one of two fitted
// processes: a lattice, when the window's timestamps sit on a fixed tick (the Mooncake
// conversation trace records arrivals on 3 s ticks), with the number of new sessions per tick
// resampled; otherwise a renewal process of start batches (sessions starting at one timestamp)
// with the empirical gaps and batch sizes resampled (Azure's code trace has gaps with a
// coefficient of variation of 13 and minutes-long pauses that no gamma law fits). A rate scales
// only the session starts: the turns of a session keep their trace-time offsets. A window of a
// day or more also has a diurnal shape (diurnal.h): the start process is fitted on, and
// generated in, the operational time that takes the hourly rate swing out.
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

#include "sim/core/rng.h"
#include "sim/core/time.h"
#include "sim/workload/diurnal.h"
#include "sim/workload/trace_record.h"
#include "sim/workload/trace_window.h"

namespace moesim::sim {

// Marks a session-local private hash id in TraceTurn::hash_ids (the low bits are its index).
inline constexpr uint64_t kPrivateHashBit = uint64_t{1} << 63;

struct TraceTurn {
  SimTime offset_ns = 0;  // after the session's first request, trace time (>= 0)
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  // Shared ids as in the trace; private ids as kPrivateHashBit | session-local index.
  std::vector<uint64_t> hash_ids;
};

struct TraceSession {
  std::vector<TraceTurn> turns;  // in arrival order
  uint64_t num_private_ids = 0;
};

struct TraceArrivalFit {
  enum class Kind { kRenewal, kLattice };
  Kind kind = Kind::kRenewal;
  // kLattice: the tick (trace time); turn offsets are whole ticks.
  SimTime tick_ns = 0;
  // kRenewal: the gaps between start batches (trace time), resampled uniformly; the gap across
  // the lap's seam is one of them, so their mean is the lap over the number of batches.
  std::vector<SimTime> gaps_ns;
  // Sessions per start batch (kRenewal, each >= 1) or per tick (kLattice, zeros included),
  // resampled uniformly.
  std::vector<int32_t> batch_sizes;

  // Mean start batches (kRenewal) or ticks (kLattice) per second of trace time.
  double batches_per_s() const;
  // Coefficient of variation of the renewal gaps (0 for a lattice).
  double gap_cv() const;
};

struct TraceModel {
  std::vector<TraceSession> sessions;  // in the order of their first row in the window
  TraceArrivalFit arrival;             // on operational time when `diurnal` is not empty
  DiurnalShape diurnal;                // empty for a window shorter than a day
  bool has_hash_ids = false;           // Mooncake rows
  uint64_t first_fresh_id = 0;         // fresh private ids start here, above every id of the window
  int64_t num_shared_ids = 0;          // hash ids kept as they are (trace_window.h)
  SimTime max_session_span_ns = 0;

  // Requests per second of trace time the model generates at rate multiplier 1.
  double rate_per_s() const;
  double mean_turns_per_session() const;
};

// Fits the model to the window's rows. Precondition (checked): the window has a period and at
// least one row.
TraceModel fit_trace_model(const std::vector<TraceRecord>& rows, const TraceWindow& window);

struct TraceDraw {
  SimTime arrival_ns = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::vector<uint64_t> hash_ids;  // empty when the model has none
};

// Generates the model's requests in arrival order from time 0, in steady state: session starts
// begin one gap after one session span before 0, and only requests at or after 0 are returned.
class TraceModelSampler {
 public:
  // `model` must outlive the sampler; `rate_multiplier` > 0 scales the session start rate.
  TraceModelSampler(const TraceModel& model, double rate_multiplier);
  // The next request; nullopt once one would fall past the horizon (and ever after). Draws from
  // `rng` in a fixed order: the start gap (renewal), the batch size, then the sessions.
  std::optional<TraceDraw> next(RngStream& rng);

 private:
  struct Pending {
    SimTime arrival_ns;
    uint64_t seq;  // ties in start order
    uint32_t session_idx;
    uint32_t turn_idx;
    uint64_t id_base;
    bool operator>(const Pending& o) const {
      return arrival_ns != o.arrival_ns ? arrival_ns > o.arrival_ns : seq > o.seq;
    }
  };
  void start_batch(RngStream& rng);
  SimTime draw_gap_ns(RngStream& rng) const;
  // The next start batch's real time (diurnal.h).
  SimTime real_batch_ns() const;

  const TraceModel& model_;
  double rate_multiplier_;
  SimTime next_batch_ns_ = 0;  // operational time (diurnal.h): real time without a shape
  bool started_ = false;
  bool past_horizon_ = false;
  uint64_t next_seq_ = 0;
  uint64_t next_fresh_id_ = 0;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> pending_;
};

}  // namespace moesim::sim

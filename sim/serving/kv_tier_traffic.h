// The tiered KV cache's traffic seen from the cluster (docs/serving.md, "Tiered KV cache"): the
// loads admissions start (each wakes its replica when ready, and is traced), and host-link
// contention: before a step, each GPU's NIC is slowed by its share of the window the previous
// step's length gives to KV copies on its host path; after it, those copies are delayed by the
// step's NIC bytes, moving their loads' ready events.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/core/event.h"
#include "sim/core/id_window.h"
#include "sim/core/simulation.h"
#include "sim/memory/kv_tiers.h"
#include "sim/metrics/run_recorder.h"
#include "sim/serving/replica.h"
#include "sim/serving/sequence.h"

namespace moesim::sim {

class KvTierTraffic {
 public:
  // `load_ready`: the event kind whose handler calls on_load_ready(). `traced`: the replicas the
  // Chrome trace shows (empty: all). References must outlive this object.
  KvTierTraffic(KvTiers& tiers, Simulation& sim, EventKind load_ready, RunRecorder& recorder,
                IdWindow<Seq>& seqs, const std::vector<int32_t>& traced);

  // After r's scheduler ran: an event for every load it started, at its ready time.
  void track_loads(const Replica& r);
  // A load's ready event (id0 the replica, id1 the load): true when the load is ready now (then
  // traced and forgotten: wake the replica); false when contention moved it (a later event).
  bool on_load_ready(const Event& e, const Replica& r);
  // The NIC slowdown of r's next step, per replica GPU (empty spans: none).
  std::pair<std::span<const double>, std::span<const double>> slowdown(const Replica& r);
  // After r's step `res` was timed: the copies it delayed, and their loads' events moved.
  void after_step(const Replica& r, const StepResult& res);

 private:
  struct LoadInFlight {
    int32_t replica = 0;
    KvLoadStarted load;
  };
  KvTiers& tiers_;
  Simulation& sim_;
  EventKind load_ready_;
  RunRecorder& recorder_;
  IdWindow<Seq>& seqs_;
  const std::vector<int32_t>& traced_;
  std::unordered_map<int64_t, LoadInFlight> loads_;  // by KvLoad::id; looked up, never iterated
  std::vector<double> in_slow_, out_slow_;           // the last slowdown()'s
  std::vector<std::pair<int64_t, SimTime>> moved_;   // scratch
};

}  // namespace moesim::sim

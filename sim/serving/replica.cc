#include "sim/serving/replica.h"

namespace moesim::sim {

ExpertGpus Replica::expert_gpus(int32_t moe_layer_idx) const {
  const ExpertPlacement& p = parts.placements->layer(moe_layer_idx);
  ExpertGpus out(static_cast<size_t>(p.num_experts()));
  for (int32_t e = 0; e < p.num_experts(); ++e) {
    for (int32_t g : p.replicas(e)) out[e].push_back(parts.gpus[g].value);
  }
  return out;
}

void add_replica_totals(const Replica& r, RunRecorder& recorder) {
  RunCounters& counters = recorder.counters();
  const ReplicaScheduler& sched = *r.scheduler;
  for (int32_t k = 0; k < sched.num_ranks(); ++k) {
    for (int32_t j = 0; j < r.tp(); ++j) {
      recorder.gpu(r.gpus()[k * r.tp() + j].value).kv_high_water_blocks =
          sched.kv(k).high_water_blocks();
    }
    counters.kv_evictions += sched.kv(k).num_evictions();
  }
  counters.prompt_tokens_total += sched.totals().prompt_tokens_total;
  counters.prompt_tokens_cached += sched.totals().prompt_tokens_cached;
  counters.num_preemptions += sched.totals().num_preemptions;
  if (sched.totals().num_preemptions > 0) {
    counters.actions["preempt"] += sched.totals().num_preemptions;
  }
}

}  // namespace moesim::sim

#include "sim/serving/draft_accounting.h"

namespace moesim::sim {

void DraftAccounting::on_step(const Replica& r, const StepResult& res) {
  acceptance_.add_step(res.duration_ns, res.draft_ns);
  if (res.draft_gpu_busy_ns.empty()) return;
  SimTime busy = 0;
  for (size_t j = 0; j < r.draft_gpus.size(); ++j) {
    GpuRecord& rec = recorder_.gpu(r.draft_gpus[j].value);
    rec.compute_ns += res.draft_gpu_busy_ns[j];
    rec.wait_ns += res.duration_ns - res.draft_gpu_busy_ns[j];
    busy += res.draft_gpu_busy_ns[j];
  }
  acceptance_.add_draft_gpus(busy, res.duration_ns * static_cast<SimTime>(r.draft_gpus.size()));
}

}  // namespace moesim::sim

#include "sim/serving/pd_transfer.h"

namespace moesim::sim {

SimTime PdTransfer::price(const Replica& src, const Replica& dst, const Seq& s,
                          RunCounters& counters) {
  const GpuId src_gpu = src.gpus()[s.rank * src.tp()];
  const GpuId dst_gpu = dst.gpus()[s.rank % dst.gpus().size()];
  const GpuMemoryLayout& lay = src.scheduler->layout();
  const double bytes =
      lay.kv_bytes_per_token * static_cast<double>(s.req.prompt_tokens + s.generated - 1) +
      lay.state_bytes_per_sequence;
  const GpuId pair[2] = {src_gpu, dst_gpu};
  traffic_.reset(pair);
  traffic_.set_bytes(0, 1, bytes);
  network_->run(traffic_, result_);
  counters.kv_transfers++;
  counters.kv_transfer_bytes += bytes;
  return result_.duration_ns;
}

}  // namespace moesim::sim

#include "sim/routing/routing_model.h"

#include "base/check.h"

namespace moesim::sim {

void aggregate_to_gpus(const CountMatrix& src_expert, std::span<const int32_t> gpu_of_expert,
                       int32_t num_dst_gpus, CountMatrix& out) {
  MOESIM_CHECK(gpu_of_expert.size() == static_cast<size_t>(src_expert.num_cols()),
               "one GPU per expert");
  out.reset(src_expert.num_rows(), num_dst_gpus);
  for (int32_t s = 0; s < src_expert.num_rows(); ++s) {
    const std::span<const int32_t> in = src_expert.row(s);
    const std::span<int32_t> dst = out.row(s);
    for (size_t e = 0; e < in.size(); ++e) {
      const int32_t gpu = gpu_of_expert[e];
      MOESIM_CHECK(gpu >= 0 && gpu < num_dst_gpus, "expert GPU out of range");
      dst[gpu] += in[e];
    }
  }
}

void RoutingModel::route_to_gpus(const RoutingQuery& query, std::span<const int32_t> gpu_of_expert,
                                 int32_t num_dst_gpus, CountMatrix& out) {
  route(query, per_expert_scratch_);
  aggregate_to_gpus(per_expert_scratch_, gpu_of_expert, num_dst_gpus, out);
}

}  // namespace moesim::sim

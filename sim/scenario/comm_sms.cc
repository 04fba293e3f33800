#include "sim/scenario/comm_sms.h"

#include <string>

namespace moesim::sim {

int32_t default_comm_sms(DispatchAlgorithm dispatch, bool within_one_domain) {
  switch (dispatch) {
    case DispatchAlgorithm::kHierarchical:
      return kDeepEpNormalSms;
    case DispatchAlgorithm::kLowLatency:
      return 0;
    case DispatchAlgorithm::kDirect:
      return within_one_domain ? kNcclSmsWithinDomain : kNcclSmsAcrossDomains;
  }
  return 0;
}

int32_t parse_comm_sms(TomlTable& t, DispatchAlgorithm dispatch, int32_t gpus_per_replica,
                       const Topology& topology) {
  const GpuSpec& gpu = topology.gpu_spec();
  const std::string range = "[0, " + std::to_string(gpu.num_sms - 1) + "] (the GPU '" + gpu.name +
                            "' has " + std::to_string(gpu.num_sms) +
                            " SMs; compute keeps at least one)";
  if (t.has("comm_sms")) {
    const int64_t sms = t.get_int("comm_sms");
    if (sms < 0 || sms >= gpu.num_sms) {
      t.fail("comm_sms", "value " + std::to_string(sms) + " is out of range " + range);
    }
    return static_cast<int32_t>(sms);
  }
  const int32_t sms = default_comm_sms(dispatch, gpus_per_replica <= topology.nvlink_domain_gpus());
  if (sms >= gpu.num_sms) {
    t.fail("comm_sms",
           "the default for dispatch = \"" + std::string(dispatch_algorithm_name(dispatch)) +
               "\" (" + std::to_string(sms) + " SMs) is out of range " + range + ": give comm_sms");
  }
  return sms;
}

}  // namespace moesim::sim

#include "sim/api/collective.h"

#include <memory>

#include "sim/api/option_domain.h"
#include "sim/api/usage_error.h"
#include "sim/config/config_error.h"
#include "sim/cost/profile.h"
#include "sim/network/network_model.h"
#include "sim/serving/network_models.h"
#include "sim/topology/topology_parser.h"

namespace moesim::sim::api {
namespace {

int64_t required(const std::optional<int64_t>& v, const std::string& name) {
  if (!v) throw UsageError{"missing " + name};
  return *v;
}

WireDtype wire_dtype(const std::string& text, const std::string& name) {
  const std::optional<WireDtype> dtype = parse_wire_dtype(text);
  if (!dtype) throw UsageError{name + ": unknown dtype '" + text + "' (valid: bf16, fp8)"};
  return *dtype;
}

study::CollectiveStudySpec study_spec(const CollectiveRequest& r) {
  if (r.topology_path.empty()) throw UsageError{"missing --topology"};
  study::CollectiveStudySpec spec;
  // Domains before the narrowing casts (an --ep of 2^32 + 8 was read as 8): GPUs within a
  // topology's 2^20, one step's tokens per GPU within scheduler.max_batch_tokens_per_gpu's range,
  // sizes and counts within a model card's 2^24.
  constexpr int64_t kMaxCount = int64_t{1} << 24;
  check_option_in("--ep", required(r.ep, "--ep"), 1, int64_t{1} << 20, "GPUs");
  check_option_in("--tokens-per-gpu", required(r.tokens_per_gpu, "--tokens-per-gpu"), 1, kMaxCount,
                  "tokens of one step");
  check_option_in("--hidden", required(r.hidden, "--hidden"), 1, kMaxCount, "elements");
  check_option_in("--top-k", required(r.top_k, "--top-k"), 1, kMaxCount, "experts per token");
  check_option_in("--experts", r.experts, 1, kMaxCount, "experts");
  check_option_in("--expert-groups", r.expert_groups, 1, kMaxCount, "groups");
  if (r.topk_groups) check_option_in("--topk-groups", *r.topk_groups, 1, kMaxCount, "groups");
  spec.ep_size = static_cast<int32_t>(required(r.ep, "--ep"));
  spec.tokens_per_gpu = required(r.tokens_per_gpu, "--tokens-per-gpu");
  spec.hidden = required(r.hidden, "--hidden");
  spec.top_k = static_cast<int32_t>(required(r.top_k, "--top-k"));
  spec.num_experts = static_cast<int32_t>(r.experts);
  spec.num_groups = static_cast<int32_t>(r.expert_groups);
  spec.topk_groups = static_cast<int32_t>(r.topk_groups.value_or(r.expert_groups));
  spec.dispatch_dtype = wire_dtype(r.dispatch_dtype, "--dispatch-dtype");
  spec.combine_dtype = wire_dtype(r.combine_dtype, "--combine-dtype");
  std::string error;
  const std::optional<study::ExpertSkew> skew = study::parse_expert_skew(r.skew, &error);
  if (!skew) throw UsageError{"--skew: " + error};
  spec.skew = *skew;
  const std::optional<DispatchAlgorithm> algorithm = parse_dispatch_algorithm(r.algorithm);
  if (!algorithm) {
    throw UsageError{"--algorithm: unknown '" + r.algorithm +
                     "' (valid: direct, hierarchical, low_latency)"};
  }
  spec.algorithm = *algorithm;
  if (r.ll_transport) {
    const std::optional<LowLatencyTransport> transport =
        parse_low_latency_transport(*r.ll_transport);
    if (!transport) {
      throw UsageError{"--ll-transport: unknown '" + *r.ll_transport + "' (valid: nvlink, rdma)"};
    }
    if (spec.algorithm != DispatchAlgorithm::kLowLatency) {
      throw UsageError{"--ll-transport: applies to --algorithm low_latency only"};
    }
    spec.transport = *transport;
  }
  if (r.seed && *r.seed < 0) throw UsageError{"--seed: must be >= 0"};
  spec.seed = static_cast<uint64_t>(r.seed.value_or(1));
  return spec;
}

// The topology as the collective runs on it: calibrated by the profile's [network] section
// (whose low-latency kernel costs go into `spec`), and every GPU its own node for pure RDMA.
Topology study_topology(const CollectiveRequest& r, study::CollectiveStudySpec& spec) {
  const Topology nominal = load_topology(r.topology_path);
  TopologySpec calibrated = nominal.spec();
  if (r.profile_path) {
    const CalibrationProfile profile = load_profile(*r.profile_path);
    if (profile.network.empty()) {
      throw UsageError{"--profile: " + *r.profile_path + " has no [network] section"};
    }
    calibrated = apply_network_calibration(nominal.spec(), profile.network);
    if (spec.algorithm == DispatchAlgorithm::kLowLatency) {
      spec.dispatch_kernel =
          kernel_cost(profile.network, kLowLatencyDispatchKernel, spec.transport);
      spec.combine_kernel = kernel_cost(profile.network, kLowLatencyCombineKernel, spec.transport);
    }
  }
  if (spec.transport == LowLatencyTransport::kRdma) {
    if (!(nominal.nic_bytes_per_s_per_gpu() > 0)) {
      throw UsageError{"--ll-transport: rdma needs a network (topology " + nominal.name() +
                       " has no NICs)"};
    }
    return Topology(rdma_only_spec(calibrated));
  }
  return Topology(calibrated);
}

}  // namespace

CollectiveReport collective(const CollectiveRequest& request) {
  study::CollectiveStudySpec spec = study_spec(request);
  Topology topology = study_topology(request, spec);
  if (const std::string problem = study::check_collective_study_spec(spec, topology);
      !problem.empty()) {
    throw UsageError{problem};
  }
  std::unique_ptr<NetworkModel> model;
  try {
    model = builtin_network_models().make(request.network_model, topology, "--network-model");
  } catch (const ConfigError& e) {
    throw UsageError{"--network-model: " + e.reason()};
  }
  study::CollectiveStudy study = study::run_collective_study(topology, *model, spec);
  return {std::move(topology), spec, request, std::move(study)};
}

}  // namespace moesim::sim::api

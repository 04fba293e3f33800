// The SMs the MoE all-to-all kernels hold on every GPU while they run, by kernel family: the
// default and the parser of [deployment] comm_sms. Under the micro-batch timelines compute beside
// a running collective gets the SMs left (docs/serving.md, "SM sharing"). DeepEP's normal kernels
// (dispatch = "hierarchical") run on a fixed SM count set through Buffer.set_num_sms; its
// low-latency kernels (IBGDA) hold none while the data moves ("the all-to-all communication
// during decoding does not occupy GPU SMs", deepseek-ai/profile-data README); NCCL runs one thread
// block, one SM, per channel. The numbers and their sources are on the declarations below.
#pragma once

#include <cstdint>

#include "sim/config/toml_source.h"
#include "sim/network/traffic_matrix.h"
#include "sim/topology/topology.h"

namespace moesim::sim {

// DeepEP's normal kernels: the SM count of DeepEP's README example (Buffer.set_num_sms(24)) and
// the one its tests measured the published normal-kernel tables with (deepseek-ai/DeepEP at
// ebfe47e, tests/test_intranode.py and tests/test_internode.py: `for i in (24, )`); the class
// default of Buffer.num_sms is 20.
inline constexpr int32_t kDeepEpNormalSms = 24;
// NCCL's p2p channels as NCCL logs them on 8 x H100 (p5.48xlarge): 32 within one node, 16 over
// two nodes (aws-samples/aws-do-eks at 701c554a, Container-Root/eks/deployment/nccl-test/
// README.md: "32 p2p channels" / "16 p2p channels"); an all-to-all launches one block per channel.
inline constexpr int32_t kNcclSmsWithinDomain = 32;
inline constexpr int32_t kNcclSmsAcrossDomains = 16;

// The default comm_sms of `dispatch`: kHierarchical kDeepEpNormalSms, kLowLatency 0, kDirect
// (NCCL) kNcclSmsWithinDomain when a replica's GPUs fit in one NVLink domain
// (`within_one_domain`), else kNcclSmsAcrossDomains.
int32_t default_comm_sms(DispatchAlgorithm dispatch, bool within_one_domain);

// [deployment] comm_sms of table `t` (default: default_comm_sms for a replica of
// `gpus_per_replica` GPUs of `topology`): an integer in [0, N - 1], N the topology GPU's num_sms
// (compute keeps at least one SM). Throws ConfigError naming comm_sms otherwise, also when the
// default itself leaves no SM.
int32_t parse_comm_sms(TomlTable& t, DispatchAlgorithm dispatch, int32_t gpus_per_replica,
                       const Topology& topology);

}  // namespace moesim::sim

// The shipped public profile (profiles/h800-public.toml, fitted by `moesim calibrate` from DeepEP
// V1's published normal-kernel table, docs/calibration.md "Public profiles") reproduces every
// row of that table: the logical bandwidth DeepEP's tests count (docs/network.md), of one
// synthetic layer routed as those tests route it, on topologies/h800-8x8.toml with the profile's
// [network] section applied, within 10% of the published figure; and every row of DeepEP's
// low-latency table (current kernels over NVLink within a node, original pure-RDMA kernels), its
// kernel latency within 10% with the profile's link classes and low-latency kernel costs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sim/cost/network_calibration.h"
#include "sim/cost/profile.h"
#include "sim/network/bottleneck_model.h"
#include "sim/serving/network_models.h"
#include "sim/study/collective_study.h"
#include "sim/topology/topology_parser.h"
#include "tests/support/benchmark_table.h"

namespace moesim::sim {
namespace {

using study::CollectivePhase;
using study::CollectiveStudy;
using study::CollectiveStudySpec;
using study::run_collective_study;

const std::string kSource = MOESIM_SOURCE_DIR;

struct Row {
  std::string phase;  // dispatch or combine
  int32_t ep = 0;
  std::string scope;  // intranode or internode
  double published_gbytes_per_s = 0;
};

// The table's first columns: kernel, phase, ep, scope, bottleneck_link, bottleneck_gbytes_per_s.
std::vector<Row> read_table(const std::string& path) {
  std::vector<Row> rows;
  for (const auto& c : read_benchmark_rows(path, 6)) {
    rows.push_back({c[1], std::stoi(c[2]), c[3], std::stod(c[5])});
  }
  return rows;
}

// Logical GB/s of one row on `topology` (DeepEP's routing: groups = nodes, top min(nodes, 4)).
double logical_gbytes_per_s(const Topology& topology, const Row& row) {
  CollectiveStudySpec spec;
  spec.ep_size = row.ep;
  spec.tokens_per_gpu = 4096;
  spec.hidden = 7168;
  spec.top_k = 8;
  spec.num_experts = 256;
  const int32_t nodes = std::max(1, row.ep / 8);
  spec.num_groups = nodes;
  spec.topk_groups = std::min(nodes, 4);
  spec.algorithm =
      row.scope == "intranode" ? DispatchAlgorithm::kDirect : DispatchAlgorithm::kHierarchical;
  EXPECT_EQ(check_collective_study_spec(spec, topology), "");
  BottleneckModel model(topology);
  const CollectiveStudy study = run_collective_study(topology, model, spec);
  const CollectivePhase& phase = row.phase == "dispatch" ? study.dispatch : study.combine;
  const double bytes = row.scope == "intranode" ? phase.accounting.intranode_logical_bytes
                                                : phase.accounting.internode_logical_bytes;
  return bytes / to_seconds(phase.result.duration_ns) / 1e9;
}

TEST(PublicProfile, EveryDeepEpNormalRowWithinTenPercent) {
  const Topology nominal = load_topology(kSource + "/topologies/h800-8x8.toml");
  const CalibrationProfile profile = load_profile(kSource + "/profiles/h800-public.toml");
  ASSERT_FALSE(profile.network.empty());
  const Topology calibrated(apply_network_calibration(nominal.spec(), profile.network));
  const std::vector<Row> rows =
      read_table(kSource + "/profiles/h800-public.validation/deepep_v1_normal_h800.csv");
  ASSERT_EQ(rows.size(), 8u);
  double worst_nominal = 0;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.phase + " EP" + std::to_string(row.ep));
    const double got = logical_gbytes_per_s(calibrated, row);
    EXPECT_NEAR(got / row.published_gbytes_per_s, 1.0, 0.10) << got;
    worst_nominal =
        std::max(worst_nominal,
                 std::abs(logical_gbytes_per_s(nominal, row) / row.published_gbytes_per_s - 1));
  }
  // The nominal topology alone misses by more (measured: 29.5% at EP16): the profile matters.
  EXPECT_GT(worst_nominal, 0.2);
}

struct LowLatencyRow {
  std::string table;  // current_with_nvlink or original_pure_rdma
  std::string phase;
  int32_t ep = 0;
  double latency_us = 0;
};

// The table's first columns: table, phase, ep, latency_us.
std::vector<LowLatencyRow> read_low_latency_table(const std::string& path) {
  std::vector<LowLatencyRow> rows;
  for (const auto& c : read_benchmark_rows(path, 4)) {
    rows.push_back({c[0], c[1], std::stoi(c[2]), std::stod(c[3])});
  }
  return rows;
}

// moesim's latency (us) of one low-latency row on `topology` (already calibrated or not), with
// the kernel costs of `calibration` (none when null): 128 tokens per GPU, top-8 of 256 experts,
// uniform routing.
double low_latency_us(const Topology& topology, const LowLatencyRow& row,
                      const NetworkCalibration* calibration) {
  CollectiveStudySpec spec;
  spec.ep_size = row.ep;
  spec.tokens_per_gpu = 128;
  spec.hidden = 7168;
  spec.top_k = 8;
  spec.num_experts = 256;
  spec.algorithm = DispatchAlgorithm::kLowLatency;
  const bool rdma = row.table == "original_pure_rdma";
  spec.transport = rdma ? LowLatencyTransport::kRdma : LowLatencyTransport::kNvlink;
  if (calibration) {
    spec.dispatch_kernel = kernel_cost(*calibration, kLowLatencyDispatchKernel, spec.transport);
    spec.combine_kernel = kernel_cost(*calibration, kLowLatencyCombineKernel, spec.transport);
    EXPECT_GT(spec.dispatch_kernel.fixed_s + spec.combine_kernel.fixed_s, 0);
  }
  const Topology rdma_topology(rdma_only_spec(topology.spec()));
  const Topology& t = rdma ? rdma_topology : topology;
  EXPECT_EQ(check_collective_study_spec(spec, t), "");
  BottleneckModel model(t);
  const CollectiveStudy study = run_collective_study(t, model, spec);
  const CollectivePhase& phase = row.phase == "dispatch" ? study.dispatch : study.combine;
  return to_us(phase.result.duration_ns);
}

TEST(PublicProfile, EveryDeepEpLowLatencyRowWithinTenPercent) {
  const Topology nominal = load_topology(kSource + "/topologies/h800-128x8.toml");
  const CalibrationProfile profile = load_profile(kSource + "/profiles/h800-public.toml");
  const Topology calibrated(apply_network_calibration(nominal.spec(), profile.network));
  ASSERT_EQ(profile.network.kernels.size(), 4u);  // dispatch and combine, nvlink and rdma
  const std::vector<LowLatencyRow> rows = read_low_latency_table(
      kSource + "/profiles/h800-public.validation/deepep_v1_low_latency_h800.csv");
  ASSERT_EQ(rows.size(), 24u);  // 2 tables x 2 phases x EP 8 .. 256
  double worst_without_kernels = 0;
  for (const LowLatencyRow& row : rows) {
    SCOPED_TRACE(row.table + " " + row.phase + " EP" + std::to_string(row.ep));
    const double got = low_latency_us(calibrated, row, &profile.network);
    EXPECT_NEAR(got / row.latency_us, 1.0, 0.10) << got;
    worst_without_kernels =
        std::max(worst_without_kernels,
                 std::abs(low_latency_us(calibrated, row, nullptr) / row.latency_us - 1));
  }
  // The link classes alone miss by more (measured: 32% at EP8 dispatch): the kernel costs matter.
  EXPECT_GT(worst_without_kernels, 0.2);
}

// The shipped derived profiles (moesim derive-profile, docs/calibration.md "Derived profiles")
// are h800-public's efficiencies relabelled for their GPU and topology: refitting h800-public
// without re-deriving them fails here.
TEST(PublicProfile, DerivedProfilesCarryTheH800EfficienciesForTheirGpu) {
  const CalibrationProfile h800 = load_profile(kSource + "/profiles/h800-public.toml");
  ASSERT_FALSE(h800.compute.empty());
  ASSERT_FALSE(h800.network.empty());
  for (const char* gpu : {"h100", "h200"}) {
    SCOPED_TRACE(gpu);
    const std::string name = std::string(gpu) + "-derived";
    const CalibrationProfile p = load_profile(kSource + "/profiles/" + name + ".toml");
    const Topology topo = load_topology(kSource + "/topologies/" + std::string(gpu) + "-8x8.toml");
    EXPECT_EQ(p.name, name);
    EXPECT_EQ(p.backend, "derived");
    EXPECT_EQ(p.derived_from, "h800-public.toml");
    EXPECT_NE(p.derivation.find("-> " + topo.gpu_spec().name + " on " + topo.name()),
              std::string::npos)
        << p.derivation;
    EXPECT_EQ(p.compute.gpu, topo.gpu_spec().name);
    EXPECT_EQ(p.network.topology, topo.name());
    ASSERT_EQ(p.compute.gemms.size(), h800.compute.gemms.size());
    for (size_t i = 0; i < p.compute.gemms.size(); ++i) {
      EXPECT_EQ(p.compute.gemms[i].compute_efficiency, h800.compute.gemms[i].compute_efficiency);
      EXPECT_EQ(p.compute.gemms[i].input_bandwidth_efficiency,
                h800.compute.gemms[i].input_bandwidth_efficiency);
      EXPECT_EQ(p.compute.gemms[i].output_bandwidth_efficiency,
                h800.compute.gemms[i].output_bandwidth_efficiency);
    }
    ASSERT_EQ(p.compute.attention.size(), h800.compute.attention.size());
    for (size_t i = 0; i < p.compute.attention.size(); ++i) {
      EXPECT_EQ(p.compute.attention[i].compute_efficiency,
                h800.compute.attention[i].compute_efficiency);
      EXPECT_EQ(p.compute.attention[i].bandwidth_efficiency,
                h800.compute.attention[i].bandwidth_efficiency);
    }
    ASSERT_EQ(p.network.link_classes.size(), h800.network.link_classes.size());
    for (size_t i = 0; i < p.network.link_classes.size(); ++i) {
      EXPECT_EQ(p.network.link_classes[i].efficiency, h800.network.link_classes[i].efficiency);
      EXPECT_EQ(p.network.link_classes[i].latency_s, h800.network.link_classes[i].latency_s);
    }
    ASSERT_EQ(p.network.kernels.size(), h800.network.kernels.size());
    for (size_t i = 0; i < p.network.kernels.size(); ++i) {
      EXPECT_EQ(p.network.kernels[i].fixed_s, h800.network.kernels[i].fixed_s);
    }
  }
}

}  // namespace
}  // namespace moesim::sim

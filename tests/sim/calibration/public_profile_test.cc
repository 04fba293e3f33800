// The shipped public profile (profiles/h800-public.toml, fitted by `moesim calibrate` from DeepEP
// V1's published normal-kernel table, docs/calibration.md "Public profiles") reproduces every
// row of that table: the logical bandwidth DeepEP's tests count (docs/network.md), of one
// synthetic layer routed as those tests route it, on topologies/h800-8x8.toml with the profile's
// [network] section applied, within 10% of the published figure.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cost/network_calibration.h"
#include "sim/cost/profile.h"
#include "sim/network/bottleneck_model.h"
#include "sim/network/collective_study.h"
#include "sim/topology/topology_parser.h"

namespace moesim::sim {
namespace {

const std::string kSource = MOESIM_SOURCE_DIR;

struct Row {
  std::string phase;  // dispatch or combine
  int32_t ep = 0;
  std::string scope;  // intranode or internode
  double published_gbytes_per_s = 0;
};

// The table's first columns: kernel, phase, ep, scope, bottleneck_link, bottleneck_gbytes_per_s.
std::vector<Row> read_table(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::vector<Row> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::vector<std::string> cells;
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (cells.size() < 6) continue;
    rows.push_back({cells[1], std::stoi(cells[2]), cells[3], std::stod(cells[5])});
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

}  // namespace
}  // namespace moesim::sim

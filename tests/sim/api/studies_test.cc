// The studies of the API (layers.h, prune.h, collective.h): their requests checked, their JSON
// and text writers fed by one result.
#include <gtest/gtest.h>

#include <sstream>

#include "sim/api/collective.h"
#include "sim/api/layers.h"
#include "sim/api/prune.h"
#include "sim/api/usage_error.h"
#include "tests/sim/api/usage_errors.h"

namespace moesim::sim::api {
namespace {

const std::string kSource = MOESIM_SOURCE_DIR;

template <typename F>
std::string usage_error(F fn) {
  return testing::usage_error_of(fn);
}

TEST(ApiLayers, RowsForEveryBatchAndRoutingInBothForms) {
  LayersRequest r;
  r.scenario_path = kSource + "/scenarios/teaching-crossover.toml";
  r.batches = {4, 16};
  r.timeline = true;
  const LayersReport report = layers(r);
  ASSERT_EQ(report.rows.size(), 4u);
  EXPECT_FALSE(report.timeline.empty());
  const nlohmann::json j = layers_json(report);
  ASSERT_EQ(j.at("rows").size(), 4u);
  EXPECT_EQ(j.at("rows").at(0).at("routing"), "scenario");
  EXPECT_EQ(j.at("timeline").size(), report.timeline.size());
  std::ostringstream text;
  write_layers_text(text, report);
  EXPECT_NE(text.str().find("network model bottleneck, overlap none"), std::string::npos);
  EXPECT_NE(text.str().find("GPU 0, middle MoE layer, 4 seqs/GPU"), std::string::npos);
  r.overlap = "dual";
  EXPECT_EQ(usage_error([&] { layers(r); }),
            "--overlap: unknown schedule 'dual' (valid: none, simple, two_microbatch, "
            "decode_pipeline)");
  r.overlap.reset();
  r.batches = {0};
  EXPECT_NE(usage_error([&] { layers(r); }).find("--batches: bad value '0'"), std::string::npos);
}

TEST(ApiPrune, ChecksTheRequestBeforeLoading) {
  PruneRequest r;
  r.scenario_path = kSource + "/no/such/scenario.toml";
  r.fractions = {1.0};
  EXPECT_EQ(usage_error([&] { prune(r); }), "--fractions: 1 is not in [0, 1)");
  r.fractions = {0.2, 0.4};
  r.plan_path = "plan.json";
  EXPECT_EQ(usage_error([&] { prune(r); }), "--write-plan needs exactly one value in --fractions");
  r.plan_path.reset();
  r.batch_per_gpu = 0;
  EXPECT_EQ(usage_error([&] { prune(r); }), "--batch-per-gpu must be in [1, 1048576]");
}

TEST(ApiCollective, TheStudyOnTheRequestedTopologyAndModel) {
  CollectiveRequest r;
  r.topology_path = kSource + "/topologies/h800-8x8.toml";
  r.ep = 16;
  r.tokens_per_gpu = 128;
  r.hidden = 7168;
  r.top_k = 8;
  r.algorithm = "low_latency";
  r.ll_transport = "rdma";
  const CollectiveReport report = collective(r);
  EXPECT_EQ(report.topology.nvlink_domain_gpus(), 1);  // every GPU its own node
  const nlohmann::json j = collective_json(report);
  EXPECT_EQ(j.at("ll_transport"), "rdma");
  EXPECT_EQ(j.at("dispatch").at("logical").at("low_latency_bytes_per_rank"), 7569408.0);
  std::ostringstream text;
  write_collective_text(text, report);
  EXPECT_NE(text.str().find("pure RDMA: every peer over the network"), std::string::npos);

  r.ll_transport.reset();
  r.network_model = "flud";
  EXPECT_NE(usage_error([&] { collective(r); }).find("--network-model: "), std::string::npos);
  r.network_model = "bottleneck";
  r.ep.reset();
  EXPECT_EQ(usage_error([&] { collective(r); }), "missing --ep");
}

}  // namespace
}  // namespace moesim::sim::api

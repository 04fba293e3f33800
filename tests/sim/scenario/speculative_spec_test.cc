// The [speculative] table: accepted forms, and every bad input an error naming its key.
#include "sim/scenario/speculative_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/config/config_error.h"
#include "sim/scenario/scenario.h"

namespace moesim::sim {
namespace {

const std::string kDir = MOESIM_SOURCE_DIR "/tests/data/scenarios";

// A scenario of the tiny MTP model (or `model`) with `table` as its [speculative] body.
std::string scenario_text(const std::string& table,
                          const std::string& model = "models/tiny-mtp.toml") {
  return "name = \"t\"\nmodel = \"" + model +
         "\"\ntopology = \"../../../topologies/h200-node.toml\"\n"
         "[deployment]\nreplicas = 1\ngpus_per_replica = 8\n"
         "[workload]\nkind = \"synthetic\"\nnum_requests = 1\n"
         "[workload.arrival]\nrate_per_s = 1\n"
         "[workload.prompt_tokens]\ndistribution = \"constant\"\nvalue = 10\n"
         "[workload.output_tokens]\ndistribution = \"constant\"\nvalue = 10\n"
         "[speculative]\n" +
         table;
}

Scenario parse(const std::string& table, const std::string& model = "models/tiny-mtp.toml") {
  return parse_scenario_text(scenario_text(table, model), "t.toml", kDir);
}

// The message of the ConfigError parsing `table` raises ("" when none).
std::string error_of(const std::string& table, const std::string& model = "models/tiny-mtp.toml") {
  try {
    parse(table, model);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SpeculativeSpec, OffWithoutTheTable) {
  const Scenario sc = parse_scenario_text(
      scenario_text("").substr(0, scenario_text("").find("[speculative]")), "t.toml", kDir);
  EXPECT_FALSE(sc.speculative.enabled);
  EXPECT_EQ(sc.speculative.num_draft_tokens, 0);
}

TEST(SpeculativeSpec, ListAndRate) {
  const Scenario a = parse("method = \"mtp\"\ndraft_tokens = 2\nacceptance = [0.9, 0.6]\n");
  EXPECT_TRUE(a.speculative.enabled);
  EXPECT_EQ(a.speculative.num_draft_tokens, 2);
  EXPECT_EQ(a.speculative.acceptance, (std::vector<double>{0.9, 0.6}));
  const Scenario b = parse("method = \"mtp\"\ndraft_tokens = 3\nacceptance_rate = 0.8\n");
  EXPECT_EQ(b.speculative.acceptance, (std::vector<double>{0.8, 0.8, 0.8}));
}

TEST(SpeculativeSpec, BadInputNamesTheKey) {
  const std::string ok_acc = "acceptance = [0.9]\n";
  EXPECT_NE(
      error_of("method = \"mtp\"\ndraft_tokens = 0\n" + ok_acc).find("speculative.draft_tokens"),
      std::string::npos);
  EXPECT_NE(error_of("method = \"mtp\"\ndraft_tokens = 17\nacceptance_rate = 0.5\n")
                .find("speculative.draft_tokens"),
            std::string::npos);
  const std::string outside =
      error_of("method = \"mtp\"\ndraft_tokens = 2\nacceptance = [0.9, 1.2]\n");
  EXPECT_NE(outside.find("speculative.acceptance: value 1 (1.200000) is outside [0, 1]"),
            std::string::npos)
      << outside;
  EXPECT_NE(error_of("method = \"mtp\"\ndraft_tokens = 1\nacceptance_rate = -0.1\n")
                .find("speculative.acceptance_rate"),
            std::string::npos);
  const std::string length =
      error_of("method = \"mtp\"\ndraft_tokens = 1\nacceptance = [0.9, 0.8]\n");
  EXPECT_NE(length.find("speculative.acceptance: has 2 values; draft_tokens = 1 needs one per"),
            std::string::npos)
      << length;
  EXPECT_NE(error_of("method = \"mtp\"\ndraft_tokens = 1\n").find("give exactly one of"),
            std::string::npos);
  EXPECT_NE(error_of("method = \"mtp\"\ndraft_tokens = 1\nacceptance = [0.9]\n"
                     "acceptance_rate = 0.9\n")
                .find("give exactly one of"),
            std::string::npos);
  const std::string unknown = error_of("method = \"mtp\"\ndraft_tokens = 1\n" + ok_acc + "k = 2\n");
  EXPECT_NE(unknown.find("speculative.k"), std::string::npos) << unknown;
  const std::string method = error_of("method = \"eagle\"\ndraft_tokens = 1\n" + ok_acc);
  EXPECT_NE(method.find("speculative.method: unknown value 'eagle' (valid: mtp, draft_model)"),
            std::string::npos)
      << method;
  EXPECT_NE(error_of("method = \"mtp\"\ndraft_model = \"models/tiny-dense.toml\"\n"
                     "draft_tokens = 1\n" +
                     ok_acc)
                .find("speculative.draft_model: only with method = \"draft_model\""),
            std::string::npos);
  const std::string no_mtp =
      error_of("method = \"mtp\"\ndraft_tokens = 1\n" + ok_acc, "../../../models/tiny.toml");
  EXPECT_NE(no_mtp.find("speculative.method: \"mtp\" needs MTP modules"), std::string::npos)
      << no_mtp;
}

TEST(SpeculativeSpec, AcceptanceByDomain) {
  const std::string head =
      "method = \"mtp\"\ndraft_tokens = 2\nacceptance = [0.8, 0.6]\n"
      "[speculative.acceptance_by_domain]\n";
  const Scenario sc = parse(head + "code = 0.9\nchat = [0.5, 0.4]\n");
  EXPECT_EQ(sc.speculative.acceptance_by_domain[static_cast<int>(Domain::kCode)],
            (std::vector<double>{0.9, 0.9}));
  EXPECT_EQ(sc.speculative.acceptance_by_domain[static_cast<int>(Domain::kChat)],
            (std::vector<double>{0.5, 0.4}));
  EXPECT_TRUE(sc.speculative.acceptance_by_domain[static_cast<int>(Domain::kMath)].empty());
  EXPECT_NE(error_of(head + "poetry = 0.5\n")
                .find("speculative.acceptance_by_domain.poetry: unknown domain (valid: code, "
                      "math, chat, multilingual)"),
            std::string::npos)
      << error_of(head + "poetry = 0.5\n");
  EXPECT_NE(error_of(head + "math = [0.5]\n")
                .find("speculative.acceptance_by_domain.math: has 1 values; draft_tokens = 2"),
            std::string::npos);
  EXPECT_NE(error_of(head + "math = [0.5, 1.5]\n").find("value 1 (1.500000) is outside [0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of(head + "math = 2.0\n").find("speculative.acceptance_by_domain.math"),
            std::string::npos);
}

TEST(SpeculativeSpec, DraftModel) {
  // A dense draft model of the target's vocabulary; the target needs no MTP module.
  const Scenario sc = parse(
      "method = \"draft_model\"\ndraft_model = \"models/tiny-dense.toml\"\n"
      "draft_tokens = 2\nacceptance_rate = 0.7\n",
      "../../../models/tiny.toml");
  EXPECT_EQ(sc.speculative.method, SpeculativeMethod::kDraftModel);
  ASSERT_NE(sc.speculative.draft_model, nullptr);
  EXPECT_EQ(sc.speculative.draft_model->name, "tiny-dense");
  EXPECT_EQ(sc.speculative.draft_model_path, kDir + "/models/tiny-dense.toml");
  const std::string head = "method = \"draft_model\"\ndraft_tokens = 1\nacceptance = [0.5]\n";
  EXPECT_NE(error_of(head).find("speculative.draft_model: missing required key"), std::string::npos)
      << error_of(head);
  EXPECT_NE(error_of(head + "draft_model = \"models/none.toml\"\n").find("file not found"),
            std::string::npos);
  const std::string vocab =
      error_of(head + "draft_model = \"../../../models/mixtral-8x7b.toml\"\n");
  EXPECT_NE(vocab.find("speculative.draft_model: draft model 'mixtral-8x7b' has vocab_size 32000, "
                       "the target 'tiny-mtp' 1024"),
            std::string::npos)
      << vocab;
  // Draft GPUs of its own: only for a draft model, and only as many as the topology has left.
  const Scenario own = parse(
      "method = \"draft_model\"\ndraft_model = \"models/tiny-dense.toml\"\n"
      "draft_tokens = 1\nacceptance_rate = 0.7\ndraft_gpus = 0\n",
      "../../../models/tiny.toml");
  EXPECT_EQ(own.speculative.draft_gpus, 0);
  const std::string full =
      error_of(head + "draft_model = \"models/tiny-dense.toml\"\ndraft_gpus = 2\n",
               "../../../models/tiny.toml");
  EXPECT_NE(full.find("speculative.draft_gpus: 1 replicas x (8 target + 2 draft GPUs) exceed the "
                      "topology's 8 GPUs"),
            std::string::npos)
      << full;
  const std::string mtp = error_of(
      "method = \"mtp\"\ndraft_tokens = 1\nacceptance = [0.5]\n"
      "draft_gpus = 1\n");
  EXPECT_NE(mtp.find("speculative.draft_gpus: only with method = \"draft_model\""),
            std::string::npos)
      << mtp;
  const std::string moe = error_of(head + "draft_model = \"../../../models/tiny.toml\"\n");
  EXPECT_NE(moe.find("draft model 'tiny' has MoE or KDA layers"), std::string::npos) << moe;
}

}  // namespace
}  // namespace moesim::sim

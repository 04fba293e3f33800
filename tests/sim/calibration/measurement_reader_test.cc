#include "sim/calibration/measurement_reader.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "sim/config/config_error.h"

namespace moesim::sim {
namespace {

std::string data(const std::string& name) {
  return std::string(MOESIM_SOURCE_DIR) + "/tests/data/calibration/" + name;
}

TEST(MeasurementReader, ReadsHeaderOpsAndSteps) {
  MeasurementSet m = read_measurements(data("meas_small.jsonl"));
  EXPECT_EQ(m.mode, "replay");
  EXPECT_EQ(m.backend, "cpu");
  EXPECT_EQ(m.device, "Test CPU");
  EXPECT_EQ(m.trace_file, "trace_small.jsonl");
  EXPECT_EQ(m.scenario, "hand");
  EXPECT_EQ(m.model, "tiny");
  EXPECT_EQ(m.replay_profile, "all");
  EXPECT_EQ(m.repeats, 3);
  ASSERT_EQ(m.layer_scales.size(), 2u);
  EXPECT_EQ(m.layer_scales.at(1), 1);

  ASSERT_EQ(m.ops.size(), 3u);  // the blank line is skipped
  const OpSample& norm = m.ops[0];
  EXPECT_EQ(norm.op, "rmsnorm");
  EXPECT_EQ(norm.step, 0);
  EXPECT_EQ(norm.sim_gpu, 0);
  EXPECT_EQ(norm.layer_idx, 0);
  EXPECT_EQ(norm.tokens, 3);
  EXPECT_EQ(norm.num_sequences, 2);
  EXPECT_DOUBLE_EQ(norm.bytes, 7168);
  EXPECT_DOUBLE_EQ(norm.weight_bytes, 1024);
  EXPECT_TRUE(norm.measured);
  EXPECT_EQ(norm.measured_ns, 2000);
  EXPECT_EQ(norm.min_ns, 1900);
  EXPECT_EQ(norm.max_ns, 2600);

  const OpSample& ffn = m.ops[1];
  EXPECT_EQ(ffn.op, "expert_ffn");
  EXPECT_DOUBLE_EQ(ffn.flops, 1.5e6);
  EXPECT_EQ(ffn.context_tokens_sum, 10);
  EXPECT_EQ(ffn.context_tokens_max, 8);
  EXPECT_EQ(ffn.num_active_experts, 1);  // tokens_per_expert [4, 0]

  const OpSample& a2a = m.ops[2];
  EXPECT_EQ(a2a.op, "dispatch_a2a");
  EXPECT_FALSE(a2a.measured);
  EXPECT_EQ(a2a.measured_ns, 0);  // null when not measured

  ASSERT_EQ(m.steps.size(), 1u);
  EXPECT_EQ(m.steps[0].num_ops, 3);
  EXPECT_EQ(m.steps[0].num_not_measured, 1);
  EXPECT_EQ(m.steps[0].measured_ns_sum, 52000);
  EXPECT_EQ(m.steps[0].scaled_ns_sum, 52000);
  EXPECT_EQ(m.steps[0].sim_step_ns, 90000);
}

TEST(MeasurementReader, BenchRecordsAreOpSamplesWithoutStep) {
  MeasurementSet m = read_measurements(data("meas_bench.jsonl"));
  EXPECT_EQ(m.mode, "bench");
  ASSERT_EQ(m.ops.size(), 1u);
  EXPECT_EQ(m.ops[0].step, -1);
  EXPECT_EQ(m.ops[0].op, "attn_mla_decode");
  EXPECT_EQ(m.ops[0].tokens, 16);
  EXPECT_EQ(m.ops[0].context_tokens_max, 2048);
  EXPECT_TRUE(m.ops[0].measured);
  EXPECT_EQ(m.ops[0].measured_ns, 41000);
}

// Throws ConfigError with the expected line and key path.
void expect_error(const std::string& file, int line, const std::string& key) {
  try {
    read_measurements(data(file));
    FAIL() << file << ": expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_EQ(e.key_path(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

TEST(MeasurementReader, RejectsMalformedFiles) {
  expect_error("meas_bad_schema.jsonl", 1, "schema");
  expect_error("meas_bad_field.jsonl", 2, "tokens");
  expect_error("meas_no_header.jsonl", 1, "record");
  EXPECT_THROW(read_measurements(data("no_such_file.jsonl")), ConfigError);
}

TEST(MeasurementReader, ReadsKernelRecordsAndRejectsBadOnes) {
  const std::string header =
      R"({"record": "header", "schema": "moesim.measurements.v1", "mode": "bench"})"
      "\n";
  std::istringstream ok(
      header + R"({"record": "gemm", "layout": "masked_grouped", "dtype": "fp8", "num_groups": 4,)"
               R"( "m_per_group": 256, "n": 4096, "k": 7168, "measured_ns": 64520})"
               "\n"
               R"({"record": "attention_core", "op": "attn_mla_decode", "dtype": "bf16",)"
               R"( "bound": "memory", "flops": 1e10, "bytes": 6e8, "measured_ns": 200000})"
               "\n"
               R"({"record": "attention_core", "op": "attn_gqa_prefill", "dtype": "bf16",)"
               R"( "bound": "compute", "flops": 3.4e10, "bytes": 2.7e8, "queries": 16384,)"
               R"( "pairs": 4194304, "measured_ns": 117670})"
               "\n");
  const MeasurementSet m = read_measurements(ok, "k.jsonl");
  ASSERT_EQ(m.gemms.size(), 1u);
  EXPECT_EQ(m.gemms[0].layout, "masked_grouped");
  EXPECT_EQ(m.gemms[0].num_groups, 4);
  EXPECT_EQ(m.gemms[0].k, 7168);
  EXPECT_DOUBLE_EQ(m.gemms[0].measured_s, 64520e-9);
  ASSERT_EQ(m.attention_cores.size(), 2u);
  EXPECT_EQ(m.attention_cores[0].bound, "memory");
  EXPECT_DOUBLE_EQ(m.attention_cores[0].bytes, 6e8);
  EXPECT_EQ(m.attention_cores[0].pairs, 0.0);  // not given
  EXPECT_EQ(m.attention_cores[1].queries, 16384.0);
  EXPECT_EQ(m.attention_cores[1].pairs, 4194304.0);
  auto error_of = [&](const std::string& record) {
    std::istringstream in(header + record + "\n");
    try {
      read_measurements(in, "k.jsonl");
    } catch (const ConfigError& e) {
      return std::to_string(e.line()) + " " + e.key_path();
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"record": "gemm", "layout": "ragged", "dtype": "fp8", "num_groups": 1,)"
                     R"( "m_per_group": 1, "n": 1, "k": 1, "measured_ns": 1})"),
            "2 layout");
  EXPECT_EQ(error_of(R"({"record": "gemm", "layout": "dense", "dtype": "fp8", "num_groups": 2,)"
                     R"( "m_per_group": 1, "n": 1, "k": 1, "measured_ns": 1})"),
            "2 num_groups");
  EXPECT_EQ(error_of(R"({"record": "attention_core", "op": "attn_mla_decode", "dtype": "bf16",)"
                     R"( "bound": "latency", "flops": 1, "bytes": 1, "measured_ns": 1})"),
            "2 bound");
  EXPECT_EQ(error_of(R"({"record": "attention_core", "op": "attn_gqa_prefill", "dtype": "bf16",)"
                     R"( "bound": "compute", "flops": 1, "bytes": 1, "queries": 4,)"
                     R"( "measured_ns": 1})"),
            "2 pairs");  // queries without pairs
  EXPECT_EQ(error_of(R"({"record": "attention_core", "op": "attn_gqa_prefill", "dtype": "bf16",)"
                     R"( "bound": "compute", "flops": 1, "bytes": 1, "queries": 4, "pairs": 2,)"
                     R"( "measured_ns": 1})"),
            "2 pairs");  // fewer pairs than queries
}

TEST(MeasurementReader, ReadsTheTimingDetailOfNewerEnginesAndOlderRecordsWithout) {
  const std::string header =
      R"({"record": "header", "schema": "moesim.measurements.v1", "mode": "replay",)"
      R"( "repeats": 3, "timing": {"estimator": "min", "max_wait_fraction": 0.1,)"
      R"( "max_extra_runs": 3, "pinned": true}})"
      "\n";
  const std::string op =
      R"({"record": "op", "step": 0, "replica": 0, "sim_gpu": 0, "layer": 0, "op": "rmsnorm",)"
      R"( "tokens": 4, "flops": 0, "bytes": 100, "measured": true, "measured_ns": 900,)"
      R"( "min_ns": 900, "max_ns": 1000)";
  std::istringstream in(header + op +
                        R"(, "estimator": "min", "wait_ns": 20, "noisy": true,)"
                        R"( "retries": 2, "samples_ns": [1000, 500, 900, 950, 990],)"
                        R"( "samples_wait_ns": [0, 400, 20, 0, 300]})"
                        "\n" +
                        op + "}\n" + op + R"(, "estimator": "median", "wait_ns": null})" + "\n");
  const MeasurementSet m = read_measurements(in, "t.jsonl");
  ASSERT_EQ(m.ops.size(), 3u);
  EXPECT_EQ(m.ops[0].estimator, "min");
  EXPECT_EQ(m.ops[0].wait_ns, 20);
  EXPECT_TRUE(m.ops[0].noisy);
  EXPECT_EQ(m.ops[0].retries, 2);
  EXPECT_EQ(m.ops[0].measured_ns, 900);
  // An older record: no timing detail.
  EXPECT_EQ(m.ops[1].estimator, "");
  EXPECT_EQ(m.ops[1].wait_ns, -1);
  EXPECT_FALSE(m.ops[1].noisy);
  EXPECT_EQ(m.ops[1].retries, 0);
  EXPECT_EQ(m.ops[2].estimator, "median");
  EXPECT_EQ(m.ops[2].wait_ns, -1);  // null: unknown

  auto error_of = [&](const std::string& fields) {
    std::istringstream bad(header + op + fields + "}\n");
    try {
      read_measurements(bad, "t.jsonl");
    } catch (const ConfigError& e) {
      return std::to_string(e.line()) + " " + e.key_path();
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"(, "estimator": "mode")"), "2 estimator");
  EXPECT_EQ(error_of(R"(, "noisy": 1)"), "2 noisy");
  EXPECT_EQ(error_of(R"(, "retries": -1)"), "2 retries");
  EXPECT_EQ(error_of(R"(, "wait_ns": -5)"), "2 wait_ns");
  EXPECT_EQ(error_of(R"(, "samples_ns": [1, "x"])"), "2 samples_ns");
  EXPECT_EQ(error_of(R"(, "samples_wait_ns": 3)"), "2 samples_wait_ns");
}

}  // namespace
}  // namespace moesim::sim

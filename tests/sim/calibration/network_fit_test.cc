// The network calibration path on synthetic measurements: all-to-all times generated from known
// per-link-class efficiencies and latencies on a 2-node topology (no multi-GPU machine is at
// hand), in the forms a cluster produces (collective samples, nccl-tests alltoall_perf output,
// multi-rank engine records). The fit must recover the figures, the profile must carry them, and
// the calibrated topology must make the simulator's own network model reproduce the measurements.
#include "sim/calibration/network_fit.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "sim/calibration/collective_reader.h"
#include "sim/config/config_error.h"
#include "sim/cost/cost_model_factory.h"
#include "sim/cost/profile.h"
#include "sim/network/network_model.h"
#include "sim/network/rdma_only_topology.h"
#include "sim/network/traffic_matrix.h"
#include "tests/support/test_topologies.h"

namespace moesim::sim {
namespace {

// 2 nodes x 8 GPUs, NVLink 400 GB/s per GPU, one 50 GB/s NIC per GPU, rail-optimised.
TopologySpec two_node_spec() {
  TopologySpec spec = testing::h800_like_spec(2, 8);
  spec.nvlink_bytes_per_s = 400e9;
  return spec;
}

constexpr double kNvlinkEfficiency = 0.78;
constexpr double kNvlinkLatencyS = 24e-6;
constexpr double kNetworkEfficiency = 0.61;
constexpr double kNetworkLatencyS = 41e-6;

// What a cluster with those figures would measure: latency + nominal transfer / efficiency.
std::vector<CollectiveSample> synthetic_samples(const Topology& topology) {
  std::vector<CollectiveSample> out;
  for (int32_t ep : {4, 8, 16}) {
    for (double bytes = 1 << 16; bytes <= 1e9; bytes *= 4) {
      const NominalCollective n = nominal_collective(topology, ep, bytes);
      const bool nvlink = n.link_class == "nvlink";
      const double measured = nvlink ? kNvlinkLatencyS + n.transfer_s / kNvlinkEfficiency
                                     : kNetworkLatencyS + n.transfer_s / kNetworkEfficiency;
      out.push_back({"synthetic", ep, bytes, measured, "", false});
    }
  }
  return out;
}

// The calibrated topology's bottleneck model on the sample's uniform all-to-all.
double simulated_s(const Topology& topology, const CollectiveSample& s) {
  auto model = NetworkModelRegistry().make("bottleneck", topology);
  std::vector<GpuId> gpus;
  for (int32_t g = 0; g < s.ep_size; ++g) gpus.emplace_back(g);
  TrafficMatrix traffic(gpus);
  for (int32_t a = 0; a < s.ep_size; ++a) {
    for (int32_t b = 0; b < s.ep_size; ++b) {
      if (a != b) traffic.set_bytes(a, b, s.bytes_per_gpu / (s.ep_size - 1));
    }
  }
  return to_seconds(model->run(traffic).duration_ns);
}

void expect_recovered(const NetworkCalibration& cal) {
  ASSERT_EQ(cal.link_classes.size(), 2u);
  const LinkClassFit* nv = cal.find("nvlink");
  const LinkClassFit* net = cal.find("network");
  ASSERT_NE(nv, nullptr);
  ASSERT_NE(net, nullptr);
  EXPECT_NEAR(nv->efficiency, kNvlinkEfficiency, 1e-4);
  EXPECT_NEAR(nv->latency_s, kNvlinkLatencyS, 1e-8);
  EXPECT_NEAR(net->efficiency, kNetworkEfficiency, 1e-4);
  EXPECT_NEAR(net->latency_s, kNetworkLatencyS, 1e-8);
  EXPECT_LT(nv->quality.mape, 1e-4);
  EXPECT_LT(net->quality.mape, 1e-4);
}

TEST(NetworkFit, NominalCollectiveClassifiesTheBottleneck) {
  const Topology t(two_node_spec());
  const NominalCollective intra = nominal_collective(t, 8, 8e8);
  EXPECT_EQ(intra.link_class, "nvlink");
  // 8e8 bytes out of each GPU's 400 GB/s NVLink port, no latency.
  EXPECT_NEAR(intra.transfer_s, 8e8 / 400e9, 1e-9);
  const NominalCollective inter = nominal_collective(t, 16, 8e8);
  EXPECT_EQ(inter.link_class, "network");
  // Half of each GPU's bytes go to the other node through its 50 GB/s NIC.
  EXPECT_NEAR(inter.transfer_s, 8e8 * 8 / 15 / 50e9, 1e-8);
}

TEST(NetworkFit, RecoversKnownEfficienciesAndLatencies) {
  const Topology t(two_node_spec());
  const std::vector<CollectiveSample> samples = synthetic_samples(t);
  const NetworkFitReport rep = fit_network(samples, t);
  EXPECT_TRUE(rep.skipped.empty());
  EXPECT_EQ(rep.calibration.topology, "test-2x8");
  expect_recovered(rep.calibration);
  ASSERT_EQ(rep.rows.size(), samples.size());
  for (const auto& row : rep.rows) EXPECT_NEAR(row.predicted_s, row.measured_s, 1e-9);
  const LinkClassFit* nv = rep.calibration.find("nvlink");
  EXPECT_EQ(nv->ep_size_min, 4);
  EXPECT_EQ(nv->ep_size_max, 8);
  EXPECT_EQ(nv->bytes_per_gpu_min, 1 << 16);
}

TEST(NetworkFit, CalibratedTopologyReproducesTheMeasurements) {
  const Topology nominal(two_node_spec());
  const std::vector<CollectiveSample> samples = synthetic_samples(nominal);
  const NetworkCalibration cal = fit_network(samples, nominal).calibration;
  const TopologySpec spec = apply_network_calibration(nominal.spec(), cal);
  // Line rates stay; the fitted efficiencies say what the links carry.
  EXPECT_EQ(spec.nvlink_bytes_per_s, 400e9);
  EXPECT_EQ(spec.nic_bytes_per_s, 50e9);
  EXPECT_NEAR(spec.nvlink_efficiency, kNvlinkEfficiency, 1e-4);
  EXPECT_NEAR(spec.network_efficiency, kNetworkEfficiency, 1e-4);
  const Topology calibrated(spec);
  EXPECT_NEAR(calibrated.nvlink_bytes_per_s_per_gpu(), 400e9 * kNvlinkEfficiency, 400e9 * 1e-4);
  EXPECT_NEAR(calibrated.nic_bytes_per_s_per_gpu(), 50e9 * kNetworkEfficiency, 50e9 * 1e-4);
  // Every route of a class pays the class's latency once.
  EXPECT_NEAR(to_seconds(calibrated.route_latency_ns(GpuId(0), GpuId(5))), kNvlinkLatencyS, 1e-9);
  EXPECT_NEAR(to_seconds(calibrated.route_latency_ns(GpuId(0), GpuId(13))), kNetworkLatencyS, 1e-9);
  for (const CollectiveSample& s : samples) {
    // Durations are whole nanoseconds.
    EXPECT_NEAR(simulated_s(calibrated, s), s.measured_s, 2e-9 + 1e-6 * s.measured_s)
        << "EP " << s.ep_size << ", " << s.bytes_per_gpu << " bytes per GPU";
  }
  // The nominal topology is faster than the measurements: that is the error calibration removes.
  EXPECT_LT(simulated_s(nominal, samples.back()), 0.9 * samples.back().measured_s);
}

TEST(NetworkFit, SkipsClassesWithTooFewSamplesAndRejectsSamplesOffTheTopology) {
  const Topology t(two_node_spec());
  std::vector<CollectiveSample> samples = synthetic_samples(t);
  std::vector<CollectiveSample> nvlink_only;
  for (const auto& s : samples) {
    if (s.ep_size <= 8) nvlink_only.push_back(s);
  }
  nvlink_only.push_back(samples.back());  // one network sample
  const NetworkFitReport rep = fit_network(nvlink_only, t);
  ASSERT_EQ(rep.calibration.link_classes.size(), 1u);
  EXPECT_EQ(rep.calibration.link_classes[0].link_class, "nvlink");
  ASSERT_EQ(rep.skipped.size(), 1u);
  EXPECT_NE(rep.skipped[0].find("network"), std::string::npos);
  EXPECT_THROW(fit_network({{"x", 32, 1e6, 1e-3, "", false}}, t), ConfigError);
  EXPECT_THROW(fit_network({{"x", 8, 0, 1e-3, "", false}}, t), ConfigError);
}

TEST(NetworkFit, NcclTestsOutputIsReadAsPerGpuBytesToOthers) {
  const Topology t(two_node_spec());
  // alltoall_perf over 16 ranks: size = each rank's send buffer, 1/16 of it stays local.
  std::ostringstream text;
  text << "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 4(factor)\n#\n"
          "# Using devices\n";
  for (int r = 0; r < 16; ++r) {
    text << "#  Rank " << (r < 10 ? " " : "") << r << " Group  0 Pid 1 on node" << r / 8
         << " device " << r % 8 << " [0x00] NVIDIA H200\n";
  }
  text << "#\n#       size         count      type   redop    root     time   algbw   busbw "
          "#wrong     time   algbw   busbw #wrong\n"
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
          "     (us)  (GB/s)  (GB/s)\n";
  for (double size = 1 << 20; size <= 1 << 30; size *= 4) {
    const double to_others = size * 15 / 16;
    const double us = 1e6 * (kNetworkLatencyS +
                             nominal_collective(t, 16, to_others).transfer_s / kNetworkEfficiency);
    char line[256];
    std::snprintf(line, sizeof line,
                  "  %10.0f  %12.0f     float    none      -1  %8.3f  %6.2f  %6.2f      0  "
                  "%8.3f  %6.2f  %6.2f    N/A\n",
                  size, size / 4, us, size / us / 1e3, size / us / 1e3 * 15 / 16, us,
                  size / us / 1e3, size / us / 1e3 * 15 / 16);
    text << line;
  }
  text << "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 25.1\n";
  const std::vector<CollectiveSample> samples =
      parse_nccl_tests_alltoall(text.str(), "runs/a2a_16.txt");
  ASSERT_EQ(samples.size(), 6u);
  EXPECT_EQ(samples[0].ep_size, 16);
  EXPECT_EQ(samples[0].bytes_per_gpu, (1 << 20) * 15.0 / 16);
  EXPECT_EQ(samples[0].source, "nccl-tests:a2a_16.txt");
  const NetworkFitReport rep = fit_network(samples, t);
  const LinkClassFit* net = rep.calibration.find("network");
  ASSERT_NE(net, nullptr);
  // Times are printed to 1 ns.
  EXPECT_NEAR(net->efficiency, kNetworkEfficiency, 1e-3);
  EXPECT_NEAR(net->latency_s, kNetworkLatencyS, 1e-8);
  // Without "# Rank" lines the rank count must be given.
  EXPECT_THROW(parse_nccl_tests_alltoall("  1048576 262144 float none -1 50.0 1 1 0\n", "x"),
               ConfigError);
  EXPECT_EQ(parse_nccl_tests_alltoall("  1048576 262144 float none -1 50.0 1 1 0\n", "x", 8)
                .front()
                .bytes_per_gpu,
            1048576.0 * 7 / 8);
}

TEST(NetworkFit, EngineAllToAllRecordsFormOneSamplePerCollective) {
  // Two ranks of one multi-rank replay: per (step, layer, op) the records of both ranks make one
  // sample with the mean per-GPU volume and the slowest rank's time.
  MeasurementSet m;
  m.file = "meas.jsonl";
  m.mode = "replay";
  m.trace_file = "steps.jsonl";
  m.sim_gpus = {0, 1};
  auto rec = [](int32_t gpu, const char* op, double bytes, int64_t ns) {
    OpSample s;
    s.step = 3;
    s.sim_gpu = gpu;
    s.layer_idx = 1;
    s.op = op;
    s.bytes = bytes;
    s.measured = true;
    s.measured_ns = ns;
    return s;
  };
  m.ops = {rec(0, "dispatch_a2a", 3e6, 40000), rec(1, "dispatch_a2a", 5e6, 42000),
           rec(0, "combine_a2a", 4e6, 39000), rec(1, "combine_a2a", 4e6, 38000),
           rec(0, "expert_ffn", 1e9, 1000000)};
  m.collectives = {{"meas.jsonl", 8, 1e6, 2e-5, "", false}};
  const std::vector<CollectiveSample> s = collective_samples_of({m});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].ep_size, 8);  // the `collective` record first
  EXPECT_EQ(s[1].ep_size, 2);  // then combine_a2a, dispatch_a2a (ordered by op name)
  EXPECT_DOUBLE_EQ(s[1].bytes_per_gpu, 8e6 / 4);
  EXPECT_DOUBLE_EQ(s[1].measured_s, 39e-6);
  EXPECT_DOUBLE_EQ(s[2].bytes_per_gpu, 8e6 / 4);
  EXPECT_DOUBLE_EQ(s[2].measured_s, 42e-6);
  EXPECT_EQ(s[2].source, "engine:steps.jsonl");
}

TEST(NetworkFit, ProfileRoundTripAndScenarioTopology) {
  const Topology nominal(two_node_spec());
  CalibrationProfile p;
  p.name = "net";
  p.network = fit_network(synthetic_samples(nominal), nominal).calibration;
  std::ostringstream os;
  write_profile(os, p);
  EXPECT_NE(os.str().find("[[network.link_class]]"), std::string::npos) << os.str();
  const CalibrationProfile q = parse_profile(os.str(), "net.toml");
  expect_recovered(q.network);
  EXPECT_EQ(q.network.topology, "test-2x8");
  EXPECT_EQ(q.network.find("network")->ep_size_max, 16);

  // The topology a scenario's network model runs on: calibrated with the profile, the same
  // object without a [network] section.
  auto shared = std::make_shared<const Topology>(two_node_spec());
  auto calibrated = make_network_topology(q, shared);
  EXPECT_NE(calibrated.get(), shared.get());
  EXPECT_NEAR(calibrated->nic_bytes_per_s_per_gpu(), 50e9 * kNetworkEfficiency, 1e4);
  EXPECT_EQ(make_network_topology(CalibrationProfile{}, shared).get(), shared.get());
  EXPECT_EQ(make_network_topology(CostSpec{}, shared).get(), shared.get());  // roofline

  // Malformed sections name the key.
  EXPECT_THROW(parse_profile("schema = \"moesim.profile.v1\"\n[network]\n[[network.link_class]]\n"
                             "link_class = \"pcie\"\n",
                             "bad.toml"),
               ConfigError);
}

}  // namespace
}  // namespace moesim::sim

namespace moesim::sim {
namespace {

// Low-latency kernel records: measured = fixed + the uniform all-to-all's time on the topology
// with the known link classes applied (every latency zero; pure RDMA: every GPU its own node).
// The fit recovers each (kernel, transport)'s fixed cost, the profile round-trips them, and the
// link classes are not disturbed by the kernel records.
TEST(NetworkFit, RecoversLowLatencyKernelFixedCosts) {
  const Topology t(two_node_spec());
  std::vector<CollectiveSample> samples = synthetic_samples(t);
  NetworkCalibration known;
  for (const auto& [cls, efficiency] :
       {std::pair{"nvlink", kNvlinkEfficiency}, std::pair{"network", kNetworkEfficiency}}) {
    LinkClassFit f;
    f.link_class = cls;
    f.efficiency = efficiency;
    known.link_classes.push_back(f);
  }
  TopologySpec zero = apply_network_calibration(t.spec(), known);
  zero.nvlink_latency_ns = zero.nvswitch_latency_ns = zero.nic_latency_ns = 0;
  zero.leaf_spine_latency_ns = zero.switch_latency_ns = 0;
  const Topology calibrated(zero);
  const Topology rdma(rdma_only_spec(zero));
  const struct {
    const char* kernel;
    bool rdma;
    double fixed_s;
  } kernels[] = {{kLowLatencyDispatchKernel, false, 21e-6},
                 {kLowLatencyDispatchKernel, true, 4e-6},
                 {kLowLatencyCombineKernel, false, 11e-6},
                 {kLowLatencyCombineKernel, true, 2e-6}};
  for (const auto& k : kernels) {
    for (int32_t ep : {4, 8, 16}) {
      const double bytes = 7e6 * ep / 8;
      CollectiveSample s{"ll", ep, bytes, 0.0, k.kernel, k.rdma};
      s.measured_s = k.fixed_s + simulated_s(k.rdma ? rdma : calibrated, s);
      samples.push_back(s);
    }
  }
  const NetworkFitReport rep = fit_network(samples, t);
  expect_recovered(rep.calibration);
  ASSERT_EQ(rep.calibration.kernels.size(), 4u);
  for (const auto& k : kernels) {
    const KernelFit* f = rep.calibration.find_kernel(k.kernel, k.rdma ? "rdma" : "nvlink");
    ASSERT_NE(f, nullptr) << k.kernel << " " << k.rdma;
    EXPECT_NEAR(f->fixed_s, k.fixed_s, 1e-9) << k.kernel << " " << k.rdma;
    EXPECT_EQ(f->ep_size_min, 4);
    EXPECT_EQ(f->ep_size_max, 16);
    EXPECT_LT(f->quality.mape, 1e-4);
  }
  // The profile carries them.
  CalibrationProfile p;
  p.name = "x";
  p.network = rep.calibration;
  std::ostringstream os;
  write_profile(os, p);
  const CalibrationProfile back = parse_profile(os.str(), "x.toml");
  ASSERT_EQ(back.network.kernels.size(), 4u);
  EXPECT_EQ(back.network.kernels[1].kernel, kLowLatencyDispatchKernel);
  EXPECT_EQ(back.network.kernels[1].transport, "rdma");
  EXPECT_DOUBLE_EQ(back.network.kernels[1].fixed_s, rep.calibration.kernels[1].fixed_s);
}

TEST(NetworkFit, ProfileRejectsADuplicateKernelFit) {
  const std::string kernel =
      "[[network.kernel]]\nkernel = 'low_latency_dispatch'\ntransport = 'nvlink'\n"
      "fixed_s = 1e-5\nep_size = [8, 16]\n[network.kernel.quality]\nnum_samples = 3\nr2 = 1.0\n"
      "mape = 0.0\np50_abs_rel_error = 0.0\np99_abs_rel_error = 0.0\nrms_residual_s = 0.0\n"
      "max_abs_residual_s = 0.0\n";
  const std::string text = "schema = 'moesim.profile.v1'\n[network]\n" + kernel + kernel;
  try {
    parse_profile(text, "p.toml");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate low_latency_dispatch fit over nvlink"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moesim::sim

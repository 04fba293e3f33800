#include "sim/output/run_files.h"

#include <filesystem>

namespace moesim::sim::output {

namespace fs = std::filesystem;

RunFiles::RunFiles(const Scenario& scenario, const std::optional<std::string>& out_dir,
                   const std::optional<std::string>& record_path, RunOptions& options)
    : scenario_(scenario), out_dir_(out_dir), record_path_(record_path) {
  if (out_dir_) {
    lock_.emplace(*out_dir_, "--out");
    io::ensure_output_dir((fs::path(*out_dir_) / "resolved").string(), "--out");
  }
  if (record_path_) io::check_output_file(*record_path_, "--record");
  if (out_dir_ && scenario.outputs.requests_csv) {
    requests_file_.emplace((fs::path(*out_dir_) / "requests.csv").string());
    requests_writer_.emplace(requests_file_->stream());
    options.request_sinks.push_back(&*requests_writer_);
    record_spool_.emplace(fs::path(requests_file_->path()).parent_path().string());
    options.record_spool = &*record_spool_;
  }
  if (out_dir_ && scenario.outputs.steps_csv) {
    steps_file_.emplace((fs::path(*out_dir_) / "steps.csv").string());
    steps_writer_.emplace(steps_file_->stream());
    options.step_series_sink = &*steps_writer_;
  }
  if (out_dir_ && options.chrome_trace) {
    trace_file_.emplace((fs::path(*out_dir_) / "trace.json").string());
    trace_writer_.emplace(trace_file_->stream(), &scenario.deployment);
    options.trace_sink = &*trace_writer_;
  }
}

RunFiles::~RunFiles() = default;

void RunFiles::commit(const RunOutput& out, uint64_t seed,
                      const std::optional<std::string>& scenario_text) {
  if (out_dir_) commit_out_dir(out, seed, scenario_text);
  if (record_path_) {
    io::write_file_atomically(
        *record_path_, [&](std::ostream& os) { write_step_trace(os, scenario_, out, seed); });
  }
}

void RunFiles::commit_out_dir(const RunOutput& out, uint64_t seed,
                              const std::optional<std::string>& scenario_text) {
  const Scenario& sc = scenario_;
  const fs::path dir(*out_dir_);
  if (sc.outputs.summary_json) {
    io::write_file_atomically((dir / "summary.json").string(), [&](std::ostream& os) {
      os << summary_json(sc, out, seed).dump(2) << "\n";
    });
  }
  if (requests_file_) requests_file_->commit();
  if (steps_file_) steps_file_->commit();
  if (trace_file_) {
    trace_writer_->finish();
    trace_file_->commit();
  }
  // The resolved configuration: the inputs as read, and the values the run used.
  const fs::path resolved = dir / "resolved";
  if (scenario_text) {
    io::write_file_atomically((resolved / "scenario.toml").string(),
                              [&](std::ostream& os) { os << *scenario_text; });
  } else {
    io::copy_file_atomically(sc.source_file, (resolved / "scenario.toml").string());
  }
  io::copy_file_atomically(sc.model_path, (resolved / fs::path(sc.model_path).filename()).string());
  io::copy_file_atomically(sc.topology_path,
                           (resolved / fs::path(sc.topology_path).filename()).string());
  io::write_file_atomically((resolved / "run.json").string(), [&](std::ostream& os) {
    os << resolved_run_json(sc, seed).dump(2) << "\n";
  });
}

nlohmann::json resolved_run_json(const Scenario& sc, uint64_t seed) {
  nlohmann::json j;
  j["seed"] = seed;
  j["duration_s"] = sc.run.duration_s;
  j["network_model"] = sc.network_model;
  j["cost_model"] = sc.cost.kind == CostModelKind::kRoofline ? "roofline" : "calibrated";
  j["router"] = router_policy_name(sc.scheduler.router);
  j["max_seqs"] = sc.scheduler.max_seqs;
  j["max_batch_tokens_per_gpu"] = sc.scheduler.max_batch_tokens_per_gpu;
  j["kv_block_tokens"] = sc.scheduler.kv_block_tokens;
  j["prefix_caching"] = sc.scheduler.prefix_caching;
  j["workspace_gib"] = sc.scheduler.workspace_gib;
  j["hbm_reserve_fraction"] = sc.scheduler.hbm_reserve_fraction;
  j["replicas"] = sc.deployment.num_replicas;
  j["gpus_per_replica"] = sc.deployment.gpus_per_replica;
  j["overlap"] = overlap_mode_name(sc.deployment.overlap);
  j["comm_sms"] = sc.deployment.comm_sms;
  j["routing_preset"] = sc.routing.preset;
  j["slo_ttft_ms"] = sc.slo.ttft_ms;
  j["slo_tpot_ms"] = sc.slo.tpot_ms;
  j["model"] = model_shapes_json(*sc.model, sc.deployment);
  if (sc.kv_tiers.enabled) {
    // The tiers with the topology's [host] (and, for the cluster store, NIC) figures.
    const KvTierSpec& k = sc.kv_tiers;
    j["kv_tiers"] = {{"scope", k.cluster_scope ? "cluster" : "node"},
                     {"dram_bytes_per_node", k.dram_bytes_per_node},
                     {"ssd_bytes_per_node", k.ssd_bytes_per_node},
                     {"pcie_bytes_per_s", k.pcie_bytes_per_s},
                     {"pcie_latency_ns", k.pcie_latency_ns},
                     {"nvme_bytes_per_s", k.nvme_bytes_per_s},
                     {"nvme_latency_ns", k.nvme_latency_ns},
                     {"nic_bytes_per_s", k.nic_bytes_per_s},
                     {"nic_latency_ns", k.nic_latency_ns}};
  }
  return j;
}

}  // namespace moesim::sim::output

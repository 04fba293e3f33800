#include "sim/output/run_files.h"

#include <algorithm>
#include <filesystem>
#include <utility>

namespace moesim::sim::output {

namespace fs = std::filesystem;

namespace {

// The files a run streams into its directory.
constexpr const char* kStreamedNames[] = {"requests.csv", "steps.csv", "trace.json"};
constexpr const char* kSummaryName = "summary.json";

}  // namespace

RunFiles::RunFiles(const Scenario& scenario, const std::optional<std::string>& out_dir,
                   const std::optional<std::string>& record_path, RunOptions& options)
    : scenario_(scenario), out_dir_(out_dir), record_path_(record_path) {
  if (out_dir_) {
    lock_.emplace(*out_dir_, "--out");
    const std::string resolved = (fs::path(*out_dir_) / "resolved").string();
    io::ensure_output_dir(resolved, "--out");
    // Under the lock only a run writes these names: their temporaries are a killed run's.
    std::vector<std::string> names(std::begin(kStreamedNames), std::end(kStreamedNames));
    names.push_back(kSummaryName);
    io::remove_stale_temporaries(*out_dir_, names);
    io::remove_stale_temporaries(resolved, {});
  }
  if (record_path_) {
    io::check_output_file(*record_path_, "--record");
    record_lock_.emplace(*record_path_, "--record");
  }
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

void RunFiles::export_requests(const std::string& path, RunOptions& options) {
  request_trace_.emplace(path, scenario_);
  options.arrival_sink = &*request_trace_;
  options.expert_selections = true;
}

void RunFiles::prepare_streamed() {
  if (trace_file_) trace_writer_->finish();
  std::vector<io::AtomicFile*> streamed;
  for (auto* f : {&requests_file_, &steps_file_, &trace_file_}) {
    if (f->has_value()) streamed.push_back(&f->value());
  }
  // A full disk fails every file written after it filled: the first failure names the culprit.
  std::stable_sort(streamed.begin(), streamed.end(), [](io::AtomicFile* a, io::AtomicFile* b) {
    const uint64_t sa = static_cast<uint64_t>(a->failed_write_seq());  // -1: none, last
    const uint64_t sb = static_cast<uint64_t>(b->failed_write_seq());
    return sa < sb;
  });
  for (io::AtomicFile* f : streamed) f->prepare();
}

void RunFiles::prepare_resolved(uint64_t seed, const std::optional<std::string>& scenario_text,
                                std::vector<std::unique_ptr<io::AtomicFile>>& files) {
  const Scenario& sc = scenario_;
  const fs::path resolved = fs::path(*out_dir_) / "resolved";
  if (scenario_text) {
    files.push_back(io::prepared_file((resolved / "scenario.toml").string(),
                                      [&](std::ostream& os) { os << *scenario_text; }));
  } else {
    files.push_back(io::prepared_copy(sc.source_file, (resolved / "scenario.toml").string()));
  }
  files.push_back(
      io::prepared_copy(sc.model_path, (resolved / fs::path(sc.model_path).filename()).string()));
  files.push_back(io::prepared_copy(sc.topology_path,
                                    (resolved / fs::path(sc.topology_path).filename()).string()));
  files.push_back(io::prepared_file((resolved / "run.json").string(), [&](std::ostream& os) {
    os << resolved_run_json(sc, seed).dump(2) << "\n";
  }));
}

void RunFiles::commit(const RunOutput& out, uint64_t seed,
                      const std::optional<std::string>& scenario_text) {
  // Every file complete under its temporary name first: a failure leaves the outputs as they were.
  std::vector<std::unique_ptr<io::AtomicFile>> files;
  std::unique_ptr<io::AtomicFile> summary;
  if (out_dir_) {
    prepare_streamed();
    prepare_resolved(seed, scenario_text, files);
    if (scenario_.outputs.summary_json) {
      summary = io::prepared_file(
          (fs::path(*out_dir_) / kSummaryName).string(),
          [&](std::ostream& os) { os << summary_json(scenario_, out, seed).dump(2) << "\n"; });
    }
  }
  if (record_path_) {
    files.push_back(io::prepared_file(
        *record_path_, [&](std::ostream& os) { write_step_trace(os, scenario_, out, seed); }));
  }
  if (request_trace_) files.push_back(request_trace_->prepare(out, seed));
  // Then the renames, summary.json (the mark of a complete directory) removed first, put last.
  if (out_dir_) {
    const fs::path dir(*out_dir_);
    io::remove_output_file((dir / kSummaryName).string());
    for (auto [file, name] :
         {std::pair{&requests_file_, kStreamedNames[0]}, std::pair{&steps_file_, kStreamedNames[1]},
          std::pair{&trace_file_, kStreamedNames[2]}}) {
      if (file->has_value()) {
        (*file)->publish();
      } else {
        io::remove_output_file((dir / name).string());  // an earlier run's
      }
    }
  }
  for (const auto& f : files) f->publish();
  if (summary) summary->publish();
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

#include "sim/api/layers.h"

#include <algorithm>

#include "sim/api/option_domain.h"
#include "sim/api/text_format.h"
#include "sim/api/usage_error.h"
#include "sim/serving/network_models.h"

namespace moesim::sim::api {
namespace {

// Sequences per GPU of one step: scheduler.max_seqs' ceiling. Tokens per attention rank of one
// step: scheduler.max_batch_tokens_per_gpu's ceiling (docs/scenarios.md).
constexpr int64_t kMaxSeqsPerGpu = int64_t{1} << 20;
constexpr int64_t kMaxStepTokensPerRank = int64_t{1} << 24;

void check_request(const LayersRequest& r, OverlapMode* overlap_mode) {
  for (const int64_t b : r.batches) {
    if (b < 1 || b > kMaxSeqsPerGpu) {
      throw UsageError{"--batches: bad value '" + std::to_string(b) +
                       "' (sequences per GPU: a whole number in [1, " +
                       std::to_string(kMaxSeqsPerGpu) + "], scheduler.max_seqs' range)"};
    }
  }
  if (r.batches.empty()) throw UsageError{"--batches: empty list"};
  if (r.context_tokens < 0) throw UsageError{"--context must be >= 0"};
  if (r.seed < 0) throw UsageError{"--seed must be >= 0"};
  if (r.prefill_tokens < 0) throw UsageError{"--prefill must be >= 0"};
  if (r.overlap && !parse_overlap_mode(*r.overlap, overlap_mode)) {
    throw UsageError{"--overlap: unknown schedule '" + *r.overlap +
                     "' (valid: none, simple, two_microbatch, decode_pipeline)"};
  }
  const std::vector<std::string> models = builtin_network_models().names();
  if (r.network_model &&
      std::find(models.begin(), models.end(), *r.network_model) == models.end()) {
    std::string valid;
    for (const std::string& m : models) valid += (valid.empty() ? "" : ", ") + m;
    throw UsageError{"--network-model: unknown model '" + *r.network_model + "' (valid: " + valid +
                     ")"};
  }
}

// The request's token counts within what one step of the scenario's model can hold, as the
// scenario's own keys are: a context the model supports, and a step's tokens per attention rank
// within scheduler.max_batch_tokens_per_gpu's range (a prefill of 2^25 tokens tripped an
// internal check; 2^62 printed negative times).
void check_against_scenario(const LayersRequest& r, const Scenario& sc) {
  const int64_t max_context = sc.model->max_context_tokens;
  check_option_in("--context", r.context_tokens, 0, max_context,
                  "tokens: the model's max_context_tokens");
  check_option_in("--prefill", r.prefill_tokens, 0, max_context - r.context_tokens,
                  "tokens: --context + --prefill <= the model's max_context_tokens " +
                      std::to_string(max_context));
  const int64_t tokens_per_seq =
      r.prefill_tokens > 0 ? r.prefill_tokens
                           : 1 + (sc.speculative.enabled ? sc.speculative.num_draft_tokens : 0);
  const int64_t tp = std::max<int64_t>(1, sc.deployment.attention_tp);
  for (const int64_t b : r.batches) {
    const double tokens = static_cast<double>(b) * static_cast<double>(tp * tokens_per_seq);
    if (tokens > static_cast<double>(kMaxStepTokensPerRank)) {
      throw UsageError{format_text(
          "--batches: %lld sequences per GPU of %lld tokens make %.0f tokens per attention rank in "
          "one step; at most %lld (scheduler.max_batch_tokens_per_gpu's range)",
          static_cast<long long>(b), static_cast<long long>(tokens_per_seq), tokens,
          static_cast<long long>(kMaxStepTokensPerRank))};
    }
  }
}

// Whether the scenario's MoE layers run on a micro-batch timeline (where SM sharing applies).
bool timeline_schedule(const Scenario& sc) {
  return sc.deployment.overlap == OverlapMode::kTwoMicrobatch ||
         sc.deployment.overlap == OverlapMode::kDecodePipeline;
}

void write_rows(std::ostream& os, const LayersReport& report, bool skewed, bool overlap) {
  const Scenario& sc = report.scenario;
  const std::string routing =
      skewed ? "scenario (" +
                   (sc.routing.preset.empty() ? std::string("custom") : sc.routing.preset) + ")"
             : "uniform";
  os << "\nrouting: " << routing << "\n";
  os << "  seqs/GPU   a2a us   exposed us   experts max us   experts mean us   wait us   "
        "SM lost us   step ms   a2a/experts\n";
  bool crossed = false;
  for (const auto& r : report.rows) {
    if (r.skewed != skewed) continue;
    const double ratio = r.expert_max_us > 0 ? r.comm_us / r.expert_max_us : 0;
    const char* marker = overlap ? "   <- expert compute no longer hides the all-to-all"
                                 : "   <- all-to-all dominates from here";
    const std::string wait = format_text("%.1f", r.wait_mean_us);
    const std::string lost = format_text("%.1f", r.sm_lost_mean_us);
    os << format_text("  %8lld %8.1f %12.1f %16.1f %17.1f %9s %12s %9.2f %13.2f%s\n",
                      static_cast<long long>(r.seqs_per_gpu), r.comm_us, r.exposed_comm_us,
                      r.expert_max_us, r.expert_mean_us, overlap ? "-" : wait.c_str(),
                      timeline_schedule(report.scenario) ? lost.c_str() : "-", r.step_ms, ratio,
                      (!crossed && ratio > 1.0) ? marker : "");
    if (ratio > 1.0) crossed = true;
  }
}

void write_timeline(std::ostream& os, const LayersReport& report) {
  os << format_text(
      "\nGPU 0, middle MoE layer, %lld seqs/GPU, scenario routing (us from the layer's "
      "start)\n",
      static_cast<long long>(report.request.batches.front()));
  os << format_text("  %-34s %10s %10s %10s %10s\n", "span", "start", "duration", "end", "SM lost");
  for (const auto& sp : report.timeline) {
    os << format_text("  %-34s %10.1f %10.1f %10.1f %10.1f\n", sp.name.c_str(), sp.start_us,
                      sp.duration_us, sp.start_us + sp.duration_us, sp.sm_lost_us);
  }
}

}  // namespace

LayersReport layers(const LayersRequest& request) {
  OverlapMode overlap_mode = OverlapMode::kNone;
  check_request(request, &overlap_mode);
  LayersReport report;
  report.request = request;
  report.scenario = load_scenario(request.scenario_path);
  Scenario& sc = report.scenario;
  check_against_scenario(request, sc);
  if (request.network_model) sc.network_model = *request.network_model;
  if (request.overlap) sc.deployment.overlap = overlap_mode;
  study::LayerStudyOptions options;
  options.context_tokens = request.context_tokens;
  options.prefill_tokens = request.prefill_tokens;
  options.seed = static_cast<uint64_t>(request.seed);
  options.timeline = request.timeline ? &report.timeline : nullptr;
  report.rows = study::run_layer_study(sc, request.batches, options);
  return report;
}

nlohmann::json layers_json(const LayersReport& report) {
  const Scenario& sc = report.scenario;
  const bool overlap = sc.deployment.overlap != OverlapMode::kNone;
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : report.rows) {
    j.push_back({{"seqs_per_gpu", r.seqs_per_gpu},
                 {"routing", r.skewed ? "scenario" : "uniform"},
                 {"network_model", sc.network_model},
                 {"microbatch_overlap", overlap},
                 {"overlap", overlap_mode_name(sc.deployment.overlap)},
                 {"prefill_tokens", report.request.prefill_tokens},
                 {"comm_us_per_layer", r.comm_us},
                 {"exposed_comm_us_per_layer", r.exposed_comm_us},
                 {"moe_layer_us", r.layer_us},
                 {"compute_max_us_per_layer", r.compute_max_us},
                 {"expert_max_us_per_layer", r.expert_max_us},
                 {"expert_mean_us_per_layer", r.expert_mean_us},
                 {"barrier_wait_mean_us_per_layer",
                  overlap ? nlohmann::json(nullptr) : nlohmann::json(r.wait_mean_us)},
                 {"comm_sms", sc.deployment.comm_sms},
                 {"sm_lost_mean_us_per_layer", r.sm_lost_mean_us},
                 {"step_ms", r.step_ms}});
  }
  if (!report.request.timeline) return j;
  nlohmann::json t = nlohmann::json::array();
  for (const auto& sp : report.timeline) {
    t.push_back({{"name", sp.name},
                 {"start_us", sp.start_us},
                 {"duration_us", sp.duration_us},
                 {"sm_lost_us", sp.sm_lost_us}});
  }
  return {{"rows", j}, {"timeline", t}};
}

void write_layers_text(std::ostream& os, const LayersReport& report) {
  const Scenario& sc = report.scenario;
  const LayersRequest& q = report.request;
  const bool overlap = sc.deployment.overlap != OverlapMode::kNone;
  if (q.prefill_tokens > 0) {
    os << format_text(
        "per MoE layer, one prefill step (chunks of %lld tokens), %s on %s, EP%d, context "
        "%lld\n",
        static_cast<long long>(q.prefill_tokens), sc.model->name.c_str(),
        sc.topology->name().c_str(), sc.deployment.gpus_per_replica,
        static_cast<long long>(q.context_tokens));
  } else {
    os << format_text("per MoE layer, one decode step, %s on %s, EP%d, context %lld\n",
                      sc.model->name.c_str(), sc.topology->name().c_str(),
                      sc.deployment.gpus_per_replica, static_cast<long long>(q.context_tokens));
  }
  os << format_text("network model %s, overlap %s, collectives hold %d of %d SMs\n",
                    sc.network_model.c_str(), overlap_mode_name(sc.deployment.overlap),
                    sc.deployment.comm_sms, sc.topology->gpu_spec().num_sms);
  os << format_text(
      "a2a: dispatch + combine%s\n"
      "exposed: MoE layer time - the slowest GPU's compute in it (attention + router + experts)\n"
      "wait: mean barrier wait per GPU%s\n"
      "SM lost: compute time lost to SM sharing per GPU (in compute; -: no micro-batch timeline)\n"
      "a2a/experts: a2a over the slowest GPU's expert time\n",
      overlap ? " (overlapped: it runs under expert compute)" : "",
      overlap ? " (-: the overlapped timeline records no barrier waits)" : "");
  for (bool skewed : {true, false}) write_rows(os, report, skewed, overlap);
  if (q.timeline) write_timeline(os, report);
}

}  // namespace moesim::sim::api

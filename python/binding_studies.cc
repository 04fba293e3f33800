// The module's model_show, topo_show and the studies: layers, prune, collective, trace_fit
// (sim/api/load.h, layers.h, prune.h, collective.h, trace_fit.h).
#include <pybind11/stl.h>

#include "python/binding_util.h"
#include "sim/api/trace_fit.h"

namespace moesim::python {
namespace {

using py::arg;

py::object model_show(const std::string& card, OptInt context, bool text) {
  api::ModelShowRequest request;
  request.card_path = card;
  if (context) request.context_tokens = *context;
  const sim::ModelSummary summary = call([&] { return api::model_show(request); });
  if (text) return py::str(sim::format_model_summary_text(summary));
  return to_python(nlohmann::json::parse(sim::format_model_summary_json(summary)));
}

py::object topo_show(const std::string& topology, bool text) {
  const sim::TopologySummary summary = call([&] { return api::topo_show(topology); });
  if (text) return py::str(sim::summary_text(summary));
  return to_python(sim::summary_json(summary));
}

py::object layers(const std::string& scenario, std::optional<std::vector<int64_t>> batches,
                  OptInt context, OptInt seed, OptString network_model, OptString overlap,
                  OptInt prefill, bool timeline, bool text) {
  api::LayersRequest r;
  r.scenario_path = scenario;
  if (batches) r.batches = *batches;
  if (context) r.context_tokens = *context;
  if (seed) r.seed = *seed;
  r.network_model = std::move(network_model);
  r.overlap = std::move(overlap);
  if (prefill) r.prefill_tokens = *prefill;
  r.timeline = timeline;
  const api::LayersReport report = call([&] { return api::layers(r); });
  return document(report, text, api::layers_json, api::write_layers_text);
}

py::object prune(const std::string& scenario, std::optional<std::vector<double>> fractions,
                 OptInt batch_per_gpu, OptInt context, OptInt profile_steps, OptInt tokens_per_step,
                 OptString write_plan, bool text) {
  api::PruneRequest r;
  r.scenario_path = scenario;
  if (fractions) r.fractions = *fractions;
  if (batch_per_gpu) r.batch_per_gpu = *batch_per_gpu;
  if (context) r.context_tokens = *context;
  if (profile_steps) r.profile_steps = *profile_steps;
  if (tokens_per_step) r.tokens_per_step = *tokens_per_step;
  r.plan_path = std::move(write_plan);
  const std::string out = call([&] {
    const sim::study::PruningStudy study = api::prune(r);
    return text ? sim::study::format_pruning_study_text(study)
                : sim::study::format_pruning_study_json(study);
  });
  if (text) return py::str(out);
  return to_python(nlohmann::json::parse(out));
}

py::object collective(const std::string& topology, OptInt ep, OptInt tokens_per_gpu, OptInt hidden,
                      OptInt top_k, OptInt experts, OptInt expert_groups, OptInt topk_groups,
                      OptString dispatch_dtype, OptString combine_dtype, OptString skew,
                      OptString algorithm, OptString ll_transport, OptString network_model,
                      OptInt seed, OptString profile, bool text) {
  api::CollectiveRequest r;
  r.topology_path = topology;
  r.ep = ep;
  r.tokens_per_gpu = tokens_per_gpu;
  r.hidden = hidden;
  r.top_k = top_k;
  if (experts) r.experts = *experts;
  if (expert_groups) r.expert_groups = *expert_groups;
  r.topk_groups = topk_groups;
  if (dispatch_dtype) r.dispatch_dtype = *dispatch_dtype;
  if (combine_dtype) r.combine_dtype = *combine_dtype;
  if (skew) r.skew = *skew;
  if (algorithm) r.algorithm = *algorithm;
  r.ll_transport = std::move(ll_transport);
  if (network_model) r.network_model = *network_model;
  r.seed = seed;
  r.profile_path = std::move(profile);
  const api::CollectiveReport report = call([&] { return api::collective(r); });
  return document(report, text, api::collective_json, api::write_collective_text);
}

py::object trace_fit(const std::string& trace, OptString kind, OptDouble start_s, OptDouble end_s,
                     OptInt max_requests, OptInt seed, bool text) {
  api::TraceFitRequest r;
  r.path = trace;
  r.kind = std::move(kind);
  if (start_s) r.start_s = *start_s;
  r.end_s = end_s;
  r.max_requests = max_requests;
  const api::TraceFitResult result = call([&] {
    if (seed && *seed < 0) throw api::UsageError{"--seed must be >= 0"};  // as the command's
    if (seed) r.seed = static_cast<uint64_t>(*seed);
    return api::trace_fit(r);
  });
  return document(result, text, api::trace_fit_json, api::write_trace_fit_text);
}

}  // namespace

void bind_studies(py::module_& m) {
  const py::none none;
  m.def("model_show", &model_show, arg("card"), arg("context") = none, arg("text") = false,
        "`moesim model show CARD`: the --json document or the text.");
  m.def("topo_show", &topo_show, arg("topology"), arg("text") = false,
        "`moesim topo show FILE`: the --json document or the text.");
  m.def("layers", &layers, arg("scenario"), arg("batches") = none, arg("context") = none,
        arg("seed") = none, arg("network_model") = none, arg("overlap") = none,
        arg("prefill") = none, arg("timeline") = false, arg("text") = false,
        "`moesim layers SCENARIO`: the --json document or the text.");
  m.def("prune", &prune, arg("scenario"), arg("fractions") = none, arg("batch_per_gpu") = none,
        arg("context") = none, arg("profile_steps") = none, arg("tokens_per_step") = none,
        arg("write_plan") = none, arg("text") = false,
        "`moesim prune SCENARIO`: the --json document or the text.");
  m.def("collective", &collective, arg("topology"), arg("ep") = none, arg("tokens_per_gpu") = none,
        arg("hidden") = none, arg("top_k") = none, arg("experts") = none,
        arg("expert_groups") = none, arg("topk_groups") = none, arg("dispatch_dtype") = none,
        arg("combine_dtype") = none, arg("skew") = none, arg("algorithm") = none,
        arg("ll_transport") = none, arg("network_model") = none, arg("seed") = none,
        arg("profile") = none, arg("text") = false,
        "`moesim collective`: the --json document or the text.");
  m.def("trace_fit", &trace_fit, arg("trace"), arg("kind") = none, arg("start_s") = none,
        arg("end_s") = none, arg("max_requests") = none, arg("seed") = none, arg("text") = false,
        "`moesim trace-fit TRACE`: the --json document or the text.");
}

}  // namespace moesim::python

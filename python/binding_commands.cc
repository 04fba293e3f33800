// The module's run, compare, sweep and search (sim/api/run.h, compare.h, sweep.h, search.h).
#include <pybind11/stl.h>

#include "python/binding_util.h"

namespace moesim::python {
namespace {

using py::arg;

// run(): (exit code, `moesim run --json`'s document).
py::tuple run(const py::object& scenario, const Strings& overrides, const std::string& name,
              const std::string& base_dir, OptInt seed, OptDouble duration_s, OptString fidelity,
              OptInt fidelity_check, OptString out_dir, OptString record_path, OptInt record_steps,
              std::optional<std::pair<double, double>> trace_window, bool diagnose, bool text) {
  api::RunRequest request;
  request.scenario = scenario_source(scenario, overrides, {}, name, base_dir);
  request.seed = seed;
  request.duration_s = duration_s;
  request.fidelity = std::move(fidelity);
  request.fidelity_check = fidelity_check;
  request.out_dir = std::move(out_dir);
  request.record_path = std::move(record_path);
  request.record_steps = record_steps;
  request.trace_window_s = trace_window;
  request.diagnose = diagnose;
  const api::RunResult result = call([&] { return api::run(request); });
  return py::make_tuple(result.exit_code(),
                        document(result, text, api::run_json, api::write_run_text));
}

py::object compare(const py::object& a, const py::object& b, const Strings& set_a,
                   const Strings& set_b, const Strings& drop_a, const Strings& drop_b, OptInt seed,
                   OptInt replications, OptInt resamples, OptDouble confidence,
                   OptDouble duration_s, OptInt threads, bool text) {
  api::CompareRequest request;
  request.a = scenario_source(a, set_a, drop_a, "", "");
  request.b = scenario_source(b, set_b, drop_b, "", "");
  request.seed = seed;
  request.replications = replications;
  request.resamples = resamples;
  request.confidence = confidence;
  request.duration_s = duration_s;
  request.threads = threads;
  const api::CompareReport report = call([&] { return api::compare(request); });
  return document(report, text, api::compare_json, api::write_compare_text);
}

// sweep(): (exit code, the CSV when `out` is absent else "", the summary lines of stderr).
py::tuple sweep(const std::string& sweep_file, OptString out, bool resume, OptInt threads,
                OptString shard, OptString slo, OptDouble min_attainment,
                OptDouble gpu_price_per_hour, OptString plan, OptDouble max_duration_factor) {
  api::SweepRequest request;
  std::ostringstream csv;
  request.sweep_path = sweep_file;
  request.out_path = std::move(out);
  request.resume = resume;
  request.csv = &csv;
  request.threads = threads;
  request.shard = std::move(shard);
  request.slo = std::move(slo);
  request.min_attainment = min_attainment;
  request.gpu_price_per_hour = gpu_price_per_hour;
  request.plan_path = std::move(plan);
  request.max_duration_factor = max_duration_factor;
  const api::SweepReport report = call([&] { return api::sweep(request); });
  std::ostringstream summary;
  api::write_sweep_summary(summary, report);
  return py::make_tuple(report.exit_code(), py::bytes(csv.str()), summary.str());
}

py::object search(const std::string& scenario, OptString slo, OptString grid, OptDouble target_rate,
                  OptDouble min_attainment, OptInt seed, OptDouble tolerance, OptInt max_doublings,
                  OptInt replications, OptDouble max_duration_factor, OptInt threads,
                  OptString journal, bool resume, OptDouble gpu_price_per_hour, OptString plan,
                  bool probe_infeasible, bool full_probes, bool text) {
  api::SearchRequest r;
  r.scenario_path = scenario;
  r.slo = std::move(slo);
  r.grid_path = std::move(grid);
  r.target_rate_per_s = target_rate;
  r.min_attainment = min_attainment;
  r.seed = seed;
  r.tolerance = tolerance;
  r.max_doublings = max_doublings;
  r.replications = replications;
  r.max_duration_factor = max_duration_factor;
  r.threads = threads;
  r.journal_path = std::move(journal);
  r.resume = resume;
  r.gpu_price_per_hour = gpu_price_per_hour;
  r.plan_path = std::move(plan);
  r.probe_infeasible = probe_infeasible;
  r.full_probes = full_probes;
  const api::SearchReport report = call([&] { return api::search(r); });
  return document(report, text, api::search_json, api::write_search_text);
}

}  // namespace

void bind_commands(py::module_& m) {
  const py::none none;
  m.def("run", &run, arg("scenario"), arg("overrides") = Strings{}, arg("name") = "",
        arg("base_dir") = "", arg("seed") = none, arg("duration_s") = none, arg("fidelity") = none,
        arg("fidelity_check") = none, arg("out_dir") = none, arg("record_path") = none,
        arg("record_steps") = none, arg("trace_window") = none, arg("diagnose") = false,
        arg("text") = false,
        "`moesim run` on a scenario file or dict: (exit code, the --json document or the text).");
  m.def("compare", &compare, arg("a"), arg("b"), arg("set_a") = Strings{}, arg("set_b") = Strings{},
        arg("drop_a") = Strings{}, arg("drop_b") = Strings{}, arg("seed") = none,
        arg("replications") = none, arg("resamples") = none, arg("confidence") = none,
        arg("duration_s") = none, arg("threads") = none, arg("text") = false,
        "`moesim compare A B`: the --json document or the text.");
  m.def("sweep", &sweep, arg("sweep_file"), arg("out") = none, arg("resume") = false,
        arg("threads") = none, arg("shard") = none, arg("slo") = none, arg("min_attainment") = none,
        arg("gpu_price_per_hour") = none, arg("plan") = none, arg("max_duration_factor") = none,
        "`moesim sweep`: (exit code, the CSV bytes without `out`, the summary text).");
  m.def(
      "sweep_merge",
      [](const Strings& shards, const std::string& out) {
        call([&] {
          api::sweep_merge(shards, out);
          return 0;
        });
      },
      arg("shards"), arg("out"), "`moesim sweep merge OUT SHARD...`.");
  m.def(
      "sweep_plan",
      [](const std::string& csv, OptString plan) {
        const std::string text = call([&] {
          std::ostringstream os;
          api::write_sweep_plan_summary(os, api::sweep_plan(csv, plan), plan);
          return os.str();
        });
        return text;
      },
      arg("csv"), arg("plan") = py::none(), "`moesim sweep plan SWEEP.csv`: the summary text.");
  m.def("search", &search, arg("scenario"), arg("slo") = none, arg("grid") = none,
        arg("target_rate") = none, arg("min_attainment") = none, arg("seed") = none,
        arg("tolerance") = none, arg("max_doublings") = none, arg("replications") = none,
        arg("max_duration_factor") = none, arg("threads") = none, arg("journal") = none,
        arg("resume") = false, arg("gpu_price_per_hour") = none, arg("plan") = none,
        arg("probe_infeasible") = false, arg("full_probes") = false, arg("text") = false,
        "`moesim search`: the --json document or the text.");
}

}  // namespace moesim::python

// The module's calibrate, validate and derive_profile (sim/api/calibration.h).
#include <pybind11/stl.h>

#include "python/binding_util.h"
#include "sim/calibration/validation_writers.h"

namespace moesim::python {
namespace {

using py::arg;

py::object calibrate(const Strings& measurements, OptString out, OptString name,
                     OptInt max_segments, OptInt min_samples, OptDouble min_size_gap,
                     OptDouble max_spread, OptString topology, const Strings& nccl_tests,
                     OptInt nccl_ranks, bool text) {
  api::CalibrateRequest r;
  r.measurement_paths = measurements;
  r.out_path = std::move(out);
  r.name = std::move(name);
  r.max_segments = max_segments;
  r.min_samples = min_samples;
  r.min_size_gap = min_size_gap;
  r.max_spread = max_spread;
  r.topology_path = std::move(topology);
  r.nccl_tests = nccl_tests;
  r.nccl_ranks = nccl_ranks;
  const api::CalibrateResult result = call([&] { return api::calibrate(r); });
  return document(result, text, api::calibrate_json, api::write_calibrate_text);
}

py::object validate(const std::string& scenario, OptString profile, OptString measurements,
                    OptString trace, OptString out_dir, bool text) {
  api::ValidateRequest r;
  r.scenario_path = scenario;
  r.profile_path = std::move(profile);
  r.measurements_path = std::move(measurements);
  r.trace_path = std::move(trace);
  r.out_dir = std::move(out_dir);
  const std::string out = call([&] {
    const sim::ValidationReport report = api::validate(r);
    std::ostringstream os;
    if (text) {
      sim::write_validation_text(os, report);
    } else {
      sim::write_validation_json(os, report);
    }
    return os.str();
  });
  if (text) return py::str(out);
  return to_python(nlohmann::json::parse(out));
}

py::dict derive_profile(const std::string& from, OptString source_topology, OptString topology,
                        OptString out, OptString name) {
  api::DeriveProfileRequest r;
  r.from_path = from;
  r.source_topology_path = std::move(source_topology);
  r.topology_path = std::move(topology);
  r.out_path = std::move(out);
  r.name = std::move(name);
  const api::DerivedProfile d = call([&] { return api::derive_profile(r); });
  py::dict result;
  result["name"] = d.profile.name;
  result["derivation"] = d.derivation;
  result["out"] = d.out_path;
  return result;
}

}  // namespace

void bind_calibration(py::module_& m) {
  const py::none none;
  m.def("calibrate", &calibrate, arg("measurements"), arg("out") = none, arg("name") = none,
        arg("max_segments") = none, arg("min_samples") = none, arg("min_size_gap") = none,
        arg("max_spread") = none, arg("topology") = none, arg("nccl_tests") = Strings{},
        arg("nccl_ranks") = none, arg("text") = false,
        "`moesim calibrate MEAS... --out PROFILE`: the --json fit summary or the text.");
  m.def("validate", &validate, arg("scenario"), arg("profile") = none, arg("measurements") = none,
        arg("trace") = none, arg("out_dir") = none, arg("text") = false,
        "`moesim validate`: report.json's document or the text.");
  m.def("derive_profile", &derive_profile, arg("from_profile"), arg("source_topology") = none,
        arg("topology") = none, arg("out") = none, arg("name") = none,
        "`moesim derive-profile`: {name, derivation, out}.");
}

}  // namespace moesim::python

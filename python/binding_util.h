// Shared pieces of the Python binding (binding.cc, binding_*.cc): calling the API without the
// interpreter lock and raising its errors as the moesim exceptions, JSON documents as Python
// objects, scenarios from paths or dicts.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/api.h"

namespace moesim::python {

namespace py = pybind11;
namespace api = sim::api;
using OptInt = std::optional<int64_t>;
using OptDouble = std::optional<double>;
using OptString = std::optional<std::string>;
using Strings = std::vector<std::string>;

// What a call raised, kept until the interpreter lock is held again.
struct Failure {
  enum Kind { kNone, kConfig, kUsage, kOutput } kind = kNone;
  std::string file, key_path, reason, message;
  int line = 0, column = 0;
};

// Raises the moesim exception (moesim.errors) of `failure`. Needs the interpreter lock.
[[noreturn]] void raise(const Failure& failure);

// fn() without the interpreter lock; its ConfigError, UsageError or OutputError raised as the
// moesim exception once the lock is held again.
template <typename F>
auto call(F&& fn) -> decltype(fn()) {
  Failure failure;
  std::optional<decltype(fn())> result;
  {
    py::gil_scoped_release release;
    try {
      result.emplace(fn());
    } catch (const sim::ConfigError& e) {
      failure = {Failure::kConfig, e.file(), e.key_path(), e.reason(),
                 e.what(),         e.line(), e.column()};
    } catch (const api::UsageError& e) {
      failure = {Failure::kUsage, "", "", e.message, e.message, 0, 0};
    } catch (const sim::io::OutputError& e) {
      failure = {Failure::kOutput, "", "", e.what(), e.what(), 0, 0};
    }
  }
  if (failure.kind != Failure::kNone) raise(failure);
  return std::move(*result);
}

// A JSON document as Python objects: what json.loads gives for its dump (non-finite numbers,
// which the dump writes as null, become None).
py::object to_python(const nlohmann::json& j);

// A command's result: its JSON document as Python objects, or its text when `text`.
template <typename Report, typename ToJson, typename WriteText>
py::object document(const Report& report, bool text, ToJson to_json, WriteText write_text) {
  if (!text) return to_python(to_json(report));
  std::ostringstream os;
  write_text(os, report);
  return py::str(os.str());
}

// A scenario: a file path, or a dict (`name` stands for the file in messages, relative paths
// resolve against base_dir), with "KEY.PATH=VALUE" overrides (as `moesim run --set`) and dropped
// key paths.
api::ScenarioSource scenario_source(const py::object& scenario, const Strings& overrides,
                                    const Strings& dropped, const std::string& name,
                                    const std::string& base_dir);

// The module's functions, by command group.
void bind_commands(py::module_& m);
void bind_studies(py::module_& m);
void bind_calibration(py::module_& m);

}  // namespace moesim::python

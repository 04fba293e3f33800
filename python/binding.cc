// moesim._moesim: the compiled half of the Python module (docs/python.md). It runs the command
// line's own subcommand functions (apps/moesim/cli.h) in this process with an argv, and returns
// their exit code and what they printed on stdout (the --json document, or a sweep's CSV), so the
// Python API and the CLI share one implementation of every command. python/moesim/*.py builds the
// argv and turns the output into dicts and DataFrames.
//
// `run` prints its summary into a string (run_command_on), so runs may go on in several Python
// threads at once; the other commands print to stdout, which is captured at the file-descriptor
// level, one command at a time (a process has one stdout).
//
// Errors: ConfigError, UsageError and OutputError become moesim.ConfigError, moesim.UsageError
// (a ConfigError) and moesim.OutputError (an OSError), raised with the file, line, column, key
// path and reason; the interpreter never sees a C++ exception.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"
#include "moesim_version.h"
#include "sim/config/config_error.h"
#include "sim/io/output_files.h"
#include "sim/study/overrides.h"

namespace py = pybind11;

namespace moesim::python {
namespace {

// Redirects file descriptor 1 (stdout: printf and std::cout alike) into a temporary file while
// alive; text() restores it and returns what was written. Output of other threads of the process
// written meanwhile lands in the capture too.
class StdoutCapture {
 public:
  StdoutCapture() {
    std::cout.flush();
    std::fflush(stdout);
    file_ = std::tmpfile();
    if (!file_) throw std::runtime_error("moesim: cannot create a temporary file for stdout");
    saved_fd_ = ::dup(STDOUT_FILENO);
    if (saved_fd_ < 0 || ::dup2(::fileno(file_), STDOUT_FILENO) < 0) {
      std::fclose(file_);
      throw std::runtime_error("moesim: cannot redirect stdout");
    }
  }
  ~StdoutCapture() { restore(); }
  StdoutCapture(const StdoutCapture&) = delete;
  StdoutCapture& operator=(const StdoutCapture&) = delete;

  std::string text() {
    restore();
    std::string out;
    std::rewind(file_);
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), file_)) > 0) out.append(buf, n);
    return out;
  }

 private:
  void restore() {
    if (saved_fd_ < 0) return;
    std::cout.flush();
    std::fflush(stdout);
    ::dup2(saved_fd_, STDOUT_FILENO);
    ::close(saved_fd_);
    saved_fd_ = -1;
  }
  std::FILE* file_ = nullptr;
  int saved_fd_ = -1;
};

// What a command raised, kept until the interpreter lock is held again.
struct Failure {
  enum Kind { kNone, kConfig, kUsage, kOutput } kind = kNone;
  std::string file, key_path, reason, message;
  int line = 0, column = 0;
};

// Runs fn (a command) without the interpreter lock; with `capture`, stdout is captured (one such
// call at a time) and returned, else fn writes into `text`. Raises the Python exception of a
// failure. Returns (exit code, output bytes).
py::tuple call_command(const std::function<int(std::ostream&)>& fn, bool capture) {
  static std::mutex capture_mutex;  // guards the process's file descriptor 1
  Failure failure;
  int code = 0;
  std::string out;
  {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(capture_mutex, std::defer_lock);
    std::optional<StdoutCapture> stdout_capture;
    if (capture) {
      lock.lock();
      stdout_capture.emplace();
    }
    std::ostringstream text;
    try {
      code = fn(text);
    } catch (const sim::ConfigError& e) {
      failure = {Failure::kConfig, e.file(), e.key_path(), e.reason(),
                 e.what(),         e.line(), e.column()};
    } catch (const cli::UsageError& e) {
      failure = {Failure::kUsage, "", "", e.message, e.message, 0, 0};
    } catch (const sim::io::OutputError& e) {
      failure = {Failure::kOutput, "", "", e.what(), e.what(), 0, 0};
    }
    out = stdout_capture ? stdout_capture->text() : text.str();
  }
  if (failure.kind != Failure::kNone) {
    py::module_ errors = py::module_::import("moesim.errors");
    const char* cls = failure.kind == Failure::kConfig  ? "ConfigError"
                      : failure.kind == Failure::kUsage ? "UsageError"
                                                        : "OutputError";
    py::object exc = errors.attr(cls)(failure.message, failure.file, failure.key_path,
                                      failure.reason, failure.line, failure.column);
    PyErr_SetObject(exc.get_type().ptr(), exc.ptr());
    throw py::error_already_set();
  }
  return py::make_tuple(code, py::bytes(out));
}

using CommandFn = int (*)(const std::vector<std::string>&);

const std::map<std::string, CommandFn>& commands() {
  static const std::map<std::string, CommandFn> kCommands = {
      {"model", cli::model_command},
      {"topo", cli::topo_command},
      {"collective", cli::collective_command},
      {"run", cli::run_command},
      {"compare", cli::compare_command},
      {"sweep", cli::sweep_command},
      {"search", cli::search_command},
      {"layers", cli::layers_command},
      {"prune", cli::prune_command}};
  return kCommands;
}

// A Python value of a scenario dict as a TOML node; ConfigError naming `name` and the key path
// for anything TOML cannot hold (None, sets, objects).
toml::table to_table(const py::dict& d, const std::string& name, const std::string& prefix);

std::unique_ptr<toml::node> to_node(const py::handle& v, const std::string& name,
                                    const std::string& key_path) {
  if (py::isinstance<py::bool_>(v)) return std::make_unique<toml::value<bool>>(v.cast<bool>());
  if (py::isinstance<py::int_>(v)) {
    return std::make_unique<toml::value<int64_t>>(v.cast<int64_t>());
  }
  if (py::isinstance<py::float_>(v)) {
    return std::make_unique<toml::value<double>>(v.cast<double>());
  }
  if (py::isinstance<py::str>(v)) {
    return std::make_unique<toml::value<std::string>>(v.cast<std::string>());
  }
  if (py::isinstance<py::dict>(v)) {
    return std::make_unique<toml::table>(to_table(v.cast<py::dict>(), name, key_path));
  }
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    auto arr = std::make_unique<toml::array>();
    size_t i = 0;
    for (const py::handle& item : v) {
      const std::string item_path = key_path + "[" + std::to_string(i++) + "]";
      std::unique_ptr<toml::node> n = to_node(item, name, item_path);
      n->visit([&](auto&& node) { arr->push_back(std::move(node)); });
    }
    return arr;
  }
  throw sim::ConfigError(name, 0, 0, key_path,
                         "a " + py::str(py::type::of(v).attr("__name__")).cast<std::string>() +
                             " cannot be a TOML value (int, float, bool, str, list, dict)");
}

toml::table to_table(const py::dict& d, const std::string& name, const std::string& prefix) {
  toml::table t;
  for (const auto& [k, v] : d) {
    if (!py::isinstance<py::str>(k)) {
      throw sim::ConfigError(name, 0, 0, prefix,
                             "a key that is not a string: " + py::repr(k).cast<std::string>());
    }
    const std::string key = k.cast<std::string>();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    std::unique_ptr<toml::node> n = to_node(v, name, path);
    n->visit([&](auto&& node) { t.insert_or_assign(key, std::move(node)); });
  }
  return t;
}

}  // namespace
}  // namespace moesim::python

PYBIND11_MODULE(_moesim, m) {
  using namespace moesim;
  m.doc() = "moesim's subcommands run in process (docs/python.md); use the moesim package";
  m.attr("version") = MOESIM_VERSION;

  m.def(
      "call",
      [](const std::string& command, const std::vector<std::string>& argv) {
        const auto& table = python::commands();
        auto it = table.find(command);
        if (it == table.end()) throw py::value_error("moesim: unknown command '" + command + "'");
        const python::CommandFn fn = it->second;
        return python::call_command([&](std::ostream&) { return fn(argv); }, true);
      },
      py::arg("command"), py::arg("argv"),
      "Runs `moesim COMMAND ARGV...` in this process: (exit code, stdout bytes).");

  m.def(
      "run",
      [](const std::vector<std::string>& argv, const py::object& scenario, const std::string& name,
         const std::string& base_dir) {
        if (scenario.is_none()) {
          return python::call_command(
              [&](std::ostream& os) { return cli::run_command_on(nullptr, argv, os); }, false);
        }
        std::optional<sim::study::ScenarioTemplate> t;
        try {
          t = sim::study::ScenarioTemplate::from_table(
              python::to_table(scenario.cast<py::dict>(), name, ""), name, base_dir);
        } catch (const sim::ConfigError& e) {
          // A value TOML cannot hold: raised as every other bad input is.
          return python::call_command([&](std::ostream&) -> int { throw e; }, false);
        }
        return python::call_command(
            [&](std::ostream& os) { return cli::run_command_on(&*t, argv, os); }, false);
      },
      py::arg("argv"), py::arg("scenario"), py::arg("name") = "", py::arg("base_dir") = "",
      "`moesim run ARGV...`, or on a scenario dict (relative paths against base_dir, `name` "
      "standing for the file in messages) with ARGV lacking SCENARIO: (exit code, the summary "
      "bytes).");
}

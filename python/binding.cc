// moesim._moesim: the compiled half of the Python module (docs/python.md). Each function builds
// the typed request of sim/api.h from its keyword arguments (pybind11 checks their types), calls
// the API without the interpreter lock (runs may go on in several Python threads at once), and
// returns the command's JSON document as Python objects, its text, or its CSV. No argv is built
// and no output stream is captured. python/moesim/*.py wraps these functions into the package's
// functions, DataFrames and RunResult.
//
// Errors: ConfigError, UsageError and OutputError become moesim.ConfigError, moesim.UsageError
// (a ConfigError) and moesim.OutputError (an OSError), raised with the file, line, column, key
// path and reason; the interpreter never sees a C++ exception.
#include "moesim_version.h"
#include "python/binding_util.h"

PYBIND11_MODULE(_moesim, m) {
  m.doc() = "moesim's typed API (sim/api.h) in process (docs/python.md); use the moesim package";
  m.attr("version") = MOESIM_VERSION;
  moesim::python::bind_commands(m);
  moesim::python::bind_studies(m);
  moesim::python::bind_calibration(m);
}

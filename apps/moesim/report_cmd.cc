// `moesim report INPUT --out report.html`: one self-contained HTML page (figures inlined, no
// network) of a run directory (`moesim run --out DIR`), a sweep CSV (`moesim sweep --out FILE.csv`,
// or a directory holding one) or a search document (`moesim search --json > FILE.json`). The page
// is drawn by the Python package python/moesim_report (matplotlib + pandas, docs/report.md), which
// replaces this process, so its output and exit code are the command's (2 for an input that is
// none of the three). The package directory is $MOESIM_PYTHON_DIR when set, else the source
// tree's python/ (compiled in), else python/ beside the installed binary's parent. The
// interpreter is $MOESIM_PYTHON when set, else the python3 found at configure time (/usr/bin
// first), else python3 on PATH.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "apps/moesim/cli.h"

#ifndef MOESIM_PYTHON_DIR
#define MOESIM_PYTHON_DIR ""
#endif
#ifndef MOESIM_REPORT_PYTHON
#define MOESIM_REPORT_PYTHON "python3"
#endif

namespace moesim::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDescription =
    "Writes one self-contained HTML page (figures inlined, opens offline) of INPUT:\n"
    "  a run directory (moesim run --out DIR): summary, latency CDFs, throughput and KV memory\n"
    "    over time, per-GPU step timeline with barrier waits, expert load heat map, actions;\n"
    "  a sweep CSV (moesim sweep --out FILE.csv) or a directory holding one, or a search JSON\n"
    "    (moesim search --json > FILE.json): SLO attainment grid, Pareto frontier, cost table.\n"
    "Needs python3 with matplotlib and pandas (scripts/install_deps.sh). docs/report.md.";

std::string python_dir() {
  if (const char* env = std::getenv("MOESIM_PYTHON_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  const std::string compiled = MOESIM_PYTHON_DIR;
  if (!compiled.empty() && fs::is_directory(fs::path(compiled) / "moesim_report", ec)) {
    return compiled;
  }
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = self.parent_path().parent_path() / "python";
    if (fs::is_directory(beside / "moesim_report", ec)) return beside.string();
  }
  return compiled;
}

}  // namespace

int report_command(const std::vector<std::string>& argv) {
  std::string input;
  std::optional<std::string> out, title;
  std::optional<double> price;
  CommandLine cl("report INPUT --out REPORT.html [options]", kDescription);
  cl.positional("INPUT", &input, "a run directory, a sweep CSV (or its directory), a search JSON")
      .option("-o,--out", &out, "REPORT.html", "the HTML file to write (required)")
      .option("--gpu-price-per-hour", &price, "USD",
              "price of one GPU-hour for the cost table (default: GPU-hours only)")
      .option("--title", &title, "TEXT", "the page title (default: from the input)")
      .footer("exit codes: 0 written, 1 the page could not be written, 2 bad input");
  if (!cl.parse(argv)) return 0;
  if (!out) throw UsageError{"--out REPORT.html is required"};
  if (price && !(std::isfinite(*price) && *price > 0)) {
    throw UsageError{"--gpu-price-per-hour must be a finite number > 0"};
  }

  const std::string dir = python_dir();
  std::error_code ec;  // $MOESIM_PYTHON_DIR beyond the path limits is "cannot find", not an abort
  if (dir.empty() || !fs::is_directory(fs::path(dir) / "moesim_report", ec)) {
    throw UsageError{
        "cannot find the report package python/moesim_report (set MOESIM_PYTHON_DIR "
        "to the directory that holds it)"};
  }
  const char* old = std::getenv("PYTHONPATH");
  std::string path = dir;
  if (old != nullptr && *old != '\0') path += std::string(":") + old;
  setenv("PYTHONPATH", path.c_str(), 1);

  std::string python = MOESIM_REPORT_PYTHON;
  if (const char* env = std::getenv("MOESIM_PYTHON"); env != nullptr && *env != '\0') python = env;
  std::vector<std::string> py = {python, "-m", "moesim_report", input, "--out", *out};
  if (price) {
    // Every digit of the price: std::to_string keeps six decimals (1e-7 would read as 0).
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", *price);
    py.insert(py.end(), {"--gpu-price-per-hour", text});
  }
  if (title) py.insert(py.end(), {"--title", *title});
  std::vector<char*> cargs;
  for (std::string& a : py) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  execvp(python.c_str(), cargs.data());
  throw UsageError{"cannot run " + python + " (set MOESIM_PYTHON): " + std::strerror(errno)};
}

}  // namespace moesim::cli

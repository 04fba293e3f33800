// moesim's typed API: what the `moesim` command line, the Python module (python/) and the
// benchmarks (bench/) call. One request struct and one function per command, returning a typed
// result, and the writers that turn a result into the command's text or JSON document, so every
// front end prints the same bytes. docs/api.md describes it with an example.
//
//   load      sim/api/load.h        scenarios (file or in memory, with overrides), model cards
//                                   and topologies with their derived figures
//   run       sim/api/run.h         one simulation: summary, diagnosis, outputs (--out, --record)
//   compare   sim/api/compare.h     two scenarios under common random numbers
//   sweep     sim/api/sweep.h       a parameter grid, its CSV and planner's table; merge, plan
//   search    sim/api/search.h      the highest rate meeting SLOs per configuration
//   studies   sim/api/layers.h, prune.h, collective.h
//   calibration  sim/api/calibration.h  calibrate, validate, derive-profile
//
// Errors: bad input is ConfigError (sim/config/config_error.h: file, line, key path, reason), a
// bad request value UsageError (sim/api/usage_error.h), an output that cannot be written
// OutputError (sim/io/output_files.h). Nothing here reads argv or writes to stdout.
#pragma once

#include "sim/api/calibration.h"
#include "sim/api/collective.h"
#include "sim/api/compare.h"
#include "sim/api/layers.h"
#include "sim/api/load.h"
#include "sim/api/prune.h"
#include "sim/api/run.h"
#include "sim/api/search.h"
#include "sim/api/sweep.h"
#include "sim/api/usage_error.h"
#include "sim/config/config_error.h"
#include "sim/io/output_files.h"

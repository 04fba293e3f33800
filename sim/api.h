// moesim's typed API, under the command line and the Python module (python/): per command a
// request struct, a function returning a typed result and the writers of its text or JSON, so
// every front end prints the same bytes; nothing here reads argv or writes to stdout. Errors:
// ConfigError, UsageError, OutputError (docs/api.md: the full table, an example). In sim/api/:
//   load.h         scenarios (file or in memory, with overrides), model cards, topologies
//   run.h          one simulation: summary, diagnosis, outputs (--out, --record)
//   compare.h      two scenarios under common random numbers
//   sweep.h        a parameter grid; search.h: the highest rate meeting SLOs per configuration
//   layers.h, prune.h, collective.h   the studies
//   calibration.h  calibrate, validate, derive-profile
//   trace_fit.h    the workload model of a trace window and its goodness of fit
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
#include "sim/api/trace_fit.h"
#include "sim/api/usage_error.h"
#include "sim/config/config_error.h"
#include "sim/io/output_files.h"

// Broken invariants inside the engine are bugs: MOESIM_ENGINE_CHECK aborts with file:line, the
// failed condition and a message. (engine/ does not include sim/; this mirrors sim/core/check.h.)
// User input errors are never checked this way: they throw InputError (engine/input_error.h).
#pragma once

#include <cstdio>
#include <cstdlib>

#define MOESIM_ENGINE_CHECK(cond, msg)                                                        \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: invariant violated: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   (msg));                                                                    \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

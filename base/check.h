// Broken invariants are bugs: MOESIM_CHECK aborts with file:line and the failed condition. One
// macro for sim/ and engine/. User input errors are never checked this way: they raise ConfigError
// (sim/core/config_error.h) or InputError (engine/input_error.h) at the edge.
#pragma once

#include <cstdio>
#include <cstdlib>

#define MOESIM_CHECK(cond, msg)                                                               \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: invariant violated: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   (msg));                                                                    \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

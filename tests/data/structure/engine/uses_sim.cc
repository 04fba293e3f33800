// Fixture: engine/ including sim/ (a violation) and base/ (allowed).
#include "base/json_depth.h"
#include <vector>
#  include "sim/core/time.h"

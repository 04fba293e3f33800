// Fixture: sim/serving including sim/calibration (a violation) and sim/scenario (allowed).
#include "sim/scenario/scenario.h"
#include "sim/calibration/fit.h"

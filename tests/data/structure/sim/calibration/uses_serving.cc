// Fixture: sim/calibration including sim/serving (allowed: calibration sits above serving).
#include "sim/serving/cluster.h"

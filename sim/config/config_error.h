// ConfigError lives in sim/core (sim/core/config_error.h), so that every module, the simulation
// kernel included, reports bad input the same way; this header keeps the configuration module's
// include path.
#pragma once

#include "sim/core/config_error.h"

// Fixture: python/ including apps/ (a violation).
#include "sim/api.h"
#include "apps/moesim/cli.h"

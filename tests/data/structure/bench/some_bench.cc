// Fixture: bench/ including apps/ (a violation).
#include "apps/moesim/cli.h"

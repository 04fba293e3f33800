// Fixture: apps/ may include sim/ and engine/.
#include "engine/backend.h"
#include "sim/api.h"

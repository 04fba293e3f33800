// Fixture: base/ including sim/ and engine/ (two violations).
#pragma once
#include "sim/core/time.h"
#include "engine/tensor.h"

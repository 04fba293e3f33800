// Fixture: sim/ including engine/ (a violation) and base/ (allowed).
#pragma once
#include "base/check.h"
#include "engine/backend.h"
// #include "engine/commented_out.h"

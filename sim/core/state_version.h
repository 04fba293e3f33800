// Versions of mutable model state (a layer's expert placement, a routing layer's expected
// shares), for caches that skip recomputing what did not change between steps.
//
// Every call returns a number never returned before in the process (from 1; 0 means "no version,
// do not cache"), so equal versions mean the same state even across objects: a copy keeps its
// source's version, and a new or changed state always gets a new one. Versions only key caches;
// they never reach a result, so the order in which threads draw them does not matter.
#pragma once

#include <cstdint>

namespace moesim::sim {

uint64_t next_state_version();

}  // namespace moesim::sim

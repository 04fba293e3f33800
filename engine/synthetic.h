// Deterministic synthetic values for weights, caches and activations, identical on every
// backend: element i of a tensor filled with seed s holds synthetic_value(s, i) * scale, rounded
// to the tensor's dtype. Counter-based (SplitMix64 of seed and index), so device kernels compute
// it per element without state.
#pragma once

#include <cstdint>

#include "engine/dtype.h"

namespace moesim::engine {

// SplitMix64 finaliser.
MOESIM_ENGINE_HD inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A value uniform on [-1, 1) with 24-bit resolution (exactly representable in FP32).
MOESIM_ENGINE_HD inline float synthetic_value(uint64_t seed, uint64_t index) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ index);
  const int32_t q = static_cast<int32_t>(bits >> 40);  // [0, 2^24)
  return static_cast<float>(q - (1 << 23)) * (1.0f / static_cast<float>(1 << 23));
}

// A per-tensor seed derived from a root seed and a tensor id (e.g. layer * 64 + tensor index).
MOESIM_ENGINE_HD inline uint64_t synthetic_seed(uint64_t root_seed, uint64_t tensor_id) {
  return splitmix64(root_seed * 0x100000001b3ull + tensor_id);
}

}  // namespace moesim::engine

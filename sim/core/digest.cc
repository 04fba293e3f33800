// Each 64-bit field is folded as state = mix(state ^ mix(field + golden)), where mix is the
// SplitMix64 / MurmurHash3 finalizer: a bijection with full avalanche, so the order of fields
// and every bit of every field affect the result.
#include "sim/core/digest.h"

#include <cinttypes>
#include <cstdio>

namespace moesim::sim {
namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

void EventDigest::add_value(uint64_t v) {
  state_ = mix64(state_ ^ mix64(v + 0x9e3779b97f4a7c15ULL));
}

void EventDigest::add(SimTime time, uint32_t kind, int64_t id0, int64_t id1) {
  add_value(static_cast<uint64_t>(time));
  add_value(kind);
  add_value(static_cast<uint64_t>(id0));
  add_value(static_cast<uint64_t>(id1));
}

std::string EventDigest::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, state_);
  return std::string(buf, 16);
}

}  // namespace moesim::sim

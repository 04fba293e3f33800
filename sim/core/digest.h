// Event digest: a running 64-bit hash of every executed event's (time, kind, ids), in execution
// order. Equal digests mean (with overwhelming probability) identical event histories; the
// digest of every shipped scenario is pinned by a golden test.
#pragma once

#include <cstdint>
#include <string>

#include "sim/core/time.h"

namespace moesim::sim {

class EventDigest {
 public:
  // Folds one event into the digest. Order matters.
  void add(SimTime time, uint32_t kind, int64_t id0, int64_t id1);
  // Folds an arbitrary 64-bit observation (e.g. a count) into the digest.
  void add_value(uint64_t v);
  uint64_t value() const { return state_; }
  // 16 lowercase hex digits.
  std::string hex() const;

 private:
  uint64_t state_ = 0xcbf29ce484222325ULL;
};

}  // namespace moesim::sim

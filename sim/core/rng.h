// Named random streams from one root seed.
//
// Each component draws from its own stream, derived from (root seed, stream name) by hashing,
// so adding draws to one component never moves another's numbers, and the order in which
// streams are created does not matter. Generator: xoshiro256** seeded through SplitMix64.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace moesim::sim {

class RngStream {
 public:
  // Derives the stream's state from the root seed and its name (FNV-1a of the name, mixed with
  // the seed through SplitMix64). Two streams with the same (seed, name) produce equal sequences.
  RngStream(uint64_t root_seed, std::string_view name);

  // Next raw 64-bit output.
  uint64_t next_u64();
  // Uniform double in [0, 1) with 53 random bits.
  double uniform01();
  // Uniform double in (0, 1): never exactly 0, for logarithms.
  double uniform01_open();
  // Uniform integer in [0, n), unbiased. Precondition: n > 0.
  uint64_t uniform_int(uint64_t n);

  const std::string& name() const { return name_; }

 private:
  uint64_t s_[4];
  std::string name_;
};

// The set of streams of one simulation, created on first use by name.
class RngStreams {
 public:
  explicit RngStreams(uint64_t root_seed) : root_seed_(root_seed) {}

  // The stream named `name`; created on first use. The reference stays valid for the lifetime
  // of this object.
  RngStream& stream(std::string_view name);
  uint64_t root_seed() const { return root_seed_; }

 private:
  uint64_t root_seed_;
  std::map<std::string, std::unique_ptr<RngStream>, std::less<>> streams_;
};

}  // namespace moesim::sim

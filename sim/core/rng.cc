// xoshiro256** (Blackman & Vigna), seeded by SplitMix64 from the root seed mixed with the
// FNV-1a-64 hash of the stream name. Integers in a range use Lemire's multiply-and-reject method.
#include "sim/core/rng.h"

#include "base/check.h"

namespace moesim::sim {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = kFnvOffset;
  for (unsigned char c : s) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

// Advances `x` and returns the next SplitMix64 output.
uint64_t splitmix64(uint64_t& x) {
  x += 0x9e3779b97f4a7c15ULL;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

RngStream::RngStream(uint64_t root_seed, std::string_view name) : name_(name) {
  // Mix the name hash through one SplitMix64 round so that seeds differing in few bits and names
  // differing in few bits do not cancel.
  uint64_t name_state = fnv1a64(name);
  uint64_t x = root_seed ^ splitmix64(name_state);
  for (uint64_t& word : s_) word = splitmix64(x);
  // SplitMix64 outputs are a bijection of distinct inputs, so an all-zero state is impossible
  // in practice; check anyway since xoshiro would be stuck at zero.
  MOESIM_CHECK((s_[0] | s_[1] | s_[2] | s_[3]) != 0, "xoshiro256** state is all zero");
}

uint64_t RngStream::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double RngStream::uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double RngStream::uniform01_open() {
  // (k + 0.5) / 2^53 for k in [0, 2^53): strictly inside (0, 1).
  return (static_cast<double>(next_u64() >> 11) + 0.5) * 0x1.0p-53;
}

uint64_t RngStream::uniform_int(uint64_t n) {
  MOESIM_CHECK(n > 0, "uniform_int needs n > 0");
  uint64_t x = next_u64();
  __uint128_t m = static_cast<__uint128_t>(x) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    while (low < threshold) {
      x = next_u64();
      m = static_cast<__uint128_t>(x) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

RngStream& RngStreams::stream(std::string_view name) {
  auto it = streams_.find(name);
  if (it == streams_.end()) {
    it = streams_.emplace(std::string(name), std::make_unique<RngStream>(root_seed_, name)).first;
  }
  return *it->second;
}

}  // namespace moesim::sim

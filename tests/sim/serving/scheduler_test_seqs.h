// Sequences for the replica scheduler's tests, built from structs: a request with fresh prefix
// hashes, and the cluster's sequence table holding a list of them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim/serving/replica_scheduler.h"

namespace moesim::sim::testing {

// A request of `prompt` tokens (fresh prefix hashes from `hash_base`) and `output` tokens.
inline Seq seq(int64_t prompt, int64_t output, uint64_t hash_base = 1000) {
  Seq s;
  s.req.prompt_tokens = prompt;
  s.req.output_tokens = output;
  for (int64_t b = 0; b < num_prefix_blocks(prompt); ++b) {
    s.req.prefix_block_hashes.push_back(hash_base + static_cast<uint64_t>(b));
  }
  s.prefill_target = prompt;
  return s;
}

// The cluster's sequence table holding `seqs` as sequences 0, 1, ...
inline IdWindow<Seq> table(std::vector<Seq> seqs) {
  IdWindow<Seq> t;
  for (Seq& s : seqs) {
    s.sid = static_cast<int32_t>(t.size());
    t.push_back(std::move(s));
  }
  return t;
}

}  // namespace moesim::sim::testing

// Rewriting a request's prompt (summarising, dropping old reasoning) without lying to the prefix
// cache. A prompt block keeps its hash only when its content is unchanged (it lies wholly before
// the first rewritten token); every other block gets a fresh hash, drawn from a per-policy
// stream in a namespace of its own (top bit set, then a 7-bit stream id), apart from generator
// and trace hashes (small integers). Later requests that re-use the rewritten prompt must be
// given the same fresh hashes (the policy remembers them).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/workload/request.h"

namespace moesim::sim {

// Fresh prefix-block hashes of one policy: stream ids 1 (session_coupling) and 2
// (long_context_cap) are taken.
class PolicyHashStream {
 public:
  // Precondition (checked): 0 < stream < 128.
  explicit PolicyHashStream(uint64_t stream);
  uint64_t next();

 private:
  uint64_t base_;
  uint64_t counter_ = 0;
};

// Sets request.prompt_tokens = prompt_tokens and request.reused_prefix_tokens =
// reused_prefix_tokens; its hashes become the first `kept_blocks` of `base_hashes` followed by
// fresh hashes up to num_prefix_blocks(prompt_tokens). Preconditions (checked): prompt_tokens >=
// 1; 0 <= reused_prefix_tokens <= prompt_tokens; 0 <= kept_blocks <= base_hashes.size() and the
// kept blocks are full blocks of the new prompt (kept_blocks * 512 <= prompt_tokens).
void rewrite_prompt(Request& request, int64_t prompt_tokens, int64_t reused_prefix_tokens,
                    std::span<const uint64_t> base_hashes, int64_t kept_blocks,
                    PolicyHashStream& hashes);

}  // namespace moesim::sim

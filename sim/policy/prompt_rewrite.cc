#include "sim/policy/prompt_rewrite.h"

#include "base/check.h"

namespace moesim::sim {

PolicyHashStream::PolicyHashStream(uint64_t stream) : base_((uint64_t{1} << 63) | (stream << 56)) {
  MOESIM_CHECK(stream > 0 && stream < 128, "policy hash stream out of range");
}

uint64_t PolicyHashStream::next() {
  MOESIM_CHECK(counter_ < (uint64_t{1} << 56), "policy hash stream exhausted");
  return base_ | counter_++;
}

void rewrite_prompt(Request& request, int64_t prompt_tokens, int64_t reused_prefix_tokens,
                    std::span<const uint64_t> base_hashes, int64_t kept_blocks,
                    PolicyHashStream& hashes) {
  MOESIM_CHECK(prompt_tokens >= 1, "rewritten prompt is empty");
  MOESIM_CHECK(reused_prefix_tokens >= 0 && reused_prefix_tokens <= prompt_tokens,
               "re-used prefix outside the rewritten prompt");
  MOESIM_CHECK(kept_blocks >= 0 && kept_blocks <= static_cast<int64_t>(base_hashes.size()) &&
                   kept_blocks * kPrefixBlockTokens <= prompt_tokens,
               "kept blocks outside the rewritten prompt");
  std::vector<uint64_t> out(base_hashes.begin(), base_hashes.begin() + kept_blocks);
  const int64_t num_blocks = num_prefix_blocks(prompt_tokens);
  out.reserve(static_cast<size_t>(num_blocks));
  while (static_cast<int64_t>(out.size()) < num_blocks) out.push_back(hashes.next());
  request.prompt_tokens = prompt_tokens;
  request.reused_prefix_tokens = reused_prefix_tokens;
  request.prefix_block_hashes = std::move(out);
}

}  // namespace moesim::sim

// A request as the serving layer sees it: when it arrives, how many tokens it reads and writes,
// which prefix blocks it shares with other requests, and (for agent sessions) which turn of
// which session it is.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/core/ids.h"
#include "sim/core/time.h"

namespace moesim::sim {

// Tokens per prefix block: the granularity of prefix_block_hashes (Mooncake's hash_ids).
inline constexpr int64_t kPrefixBlockTokens = 512;

// Number of prefix blocks covering `prompt_tokens` tokens (the last block may be partial).
// Precondition: prompt_tokens >= 0 (any int64: rounded up without overflowing).
inline int64_t num_prefix_blocks(int64_t prompt_tokens) {
  return prompt_tokens / kPrefixBlockTokens + (prompt_tokens % kPrefixBlockTokens != 0 ? 1 : 0);
}

// Content domain of a request, used by the routing model to pick expert popularity profiles.
enum class Domain : uint8_t { kCode = 0, kMath = 1, kChat = 2, kMultilingual = 3 };
inline constexpr int kNumDomains = 4;
// "code", "math", "chat", "multilingual": the names used in TOML (domain_mix) and outputs.
std::string_view domain_name(Domain domain);

// Coarse prompt-length class, for policies that isolate or cap long contexts.
// short: prompt < 4096 tokens; medium: < 32768; long: >= 32768.
enum class LengthClass : uint8_t { kShort = 0, kMedium = 1, kLong = 2 };
inline constexpr int64_t kMediumPromptTokens = 4096;
inline constexpr int64_t kLongPromptTokens = 32768;
LengthClass length_class(int64_t prompt_tokens);
std::string_view length_class_name(LengthClass length_class);

struct Request {
  // The token counts come first: a sequence's entry (sequence.h) holds its request right after
  // the fields every step reads, and these two are read with them.
  // Input tokens, >= 1, including any prefix re-used from earlier turns.
  int64_t prompt_tokens = 0;
  // Generated tokens, >= 1, including reasoning_tokens.
  int64_t output_tokens = 0;
  // Unique per generator, assigned 0, 1, 2, ... in the order requests are produced.
  RequestId id;
  // Absolute simulated arrival time.
  SimTime arrival_ns = 0;
  // "Thinking" tokens: the first reasoning_tokens of the output. 0 <= reasoning <= output.
  int64_t reasoning_tokens = 0;
  // Agent session this request belongs to; invalid (value -1) for independent requests.
  SessionId session;
  // 0-based turn index within the session (0 for independent requests).
  int32_t turn_idx = 0;
  // 0 for the first issue of a turn; k for its k-th re-issue after a rollback.
  int32_t attempt_idx = 0;
  // Leading prompt tokens that an earlier request of the same session already processed
  // (its prompt, plus its output when it stays in context). 0 for independent requests.
  int64_t reused_prefix_tokens = 0;
  // One hash per 512-token block of the prompt: size() == num_prefix_blocks(prompt_tokens).
  // Equal hashes at equal positions mean equal content (re-usable KV blocks); Mooncake traces
  // give them, generators assign fresh ones for new content and repeat them for re-used prefix.
  // Exception: a generated request (not an agent turn) whose prompt + output exceed the model's
  // context (WorkloadSpec::max_request_tokens) has none: the run rejects it on arrival.
  std::vector<uint64_t> prefix_block_hashes;
  Domain domain = Domain::kChat;
};

}  // namespace moesim::sim

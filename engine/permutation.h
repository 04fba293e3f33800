// Forced routing and the permutation of token copies by expert (host-side index arithmetic).
//
// A step trace records, per MoE layer, how many of a GPU's token selections go to each expert
// (and to which GPU's replica), not which token picked what. assign_forced_routing() turns those
// counts back into per-token choices: the selections sorted by (expert, destination GPU) are
// dealt round-robin to the tokens, so selection j goes to token j mod T as its (j / T)-th
// choice. Because no expert is chosen more than T times, a token never gets the same expert
// twice. make_permutation() then orders the T * top_k token copies by expert for the grouped
// expert FFN, and gives the inverse order for the combine.
#pragma once

#include <cstdint>
#include <vector>

namespace moesim::engine {

// count selections of `expert` executed on `dst_gpu`.
struct ExpertSelectionCount {
  int32_t expert = 0;
  int32_t dst_gpu = 0;
  int64_t count = 0;
};

// Per-token choices of T tokens, slot order: slot t * top_k + j is token t's j-th choice.
struct ForcedRouting {
  int64_t num_tokens = 0;
  int64_t top_k = 0;
  std::vector<int32_t> expert_ids;  // [T * top_k]
  std::vector<int32_t> dst_gpus;    // [T * top_k]
};

// Deals `counts` to num_tokens tokens as described above. Preconditions (checked, aborting:
// the step-trace reader validates traces first): counts sum to num_tokens * top_k, no expert's
// total exceeds num_tokens, counts >= 0.
ForcedRouting assign_forced_routing(int64_t num_tokens, int64_t top_k,
                                    std::vector<ExpertSelectionCount> counts);

// Token copies ordered by expert (stable: by slot within an expert).
struct Permutation {
  std::vector<int32_t> gather_rows;        // [T * k]: permuted row i is a copy of this token
  std::vector<int32_t> scatter_rows;       // [T * k]: permuted row i belongs to this slot
  std::vector<int64_t> tokens_per_expert;  // [num_experts]
};

// expert_ids in slot order ([T * top_k], values in [0, num_experts)).
Permutation make_permutation(const std::vector<int32_t>& expert_ids, int64_t top_k,
                             int64_t num_experts);

}  // namespace moesim::engine

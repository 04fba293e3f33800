// Internal to sim/model: a HuggingFace config's dtype and quantization_config as a card's
// Precision (dtype per tensor group plus the stored bits of quantised groups, scales included).
// The formats, which modules each one quantises and how bytes are counted are in
// docs/models.md ("Quantised checkpoints").
#pragma once

#include "sim/model/hf_json_reader.h"
#include "sim/model/model_card.h"

namespace moesim::sim {

// The checkpoint's dtype from "dtype" (transformers >= 4.56 and 5.x) or "torch_dtype" (4.x) of
// `top`, or of `inner` (a llama4 text_config) when `top` has neither; spellings present in both
// places must agree. bfloat16 when absent.
DType read_hf_dtype(HfJsonReader& top, HfJsonReader* inner);

// Precision of `card` (its layers already built) from top.quantization_config: every group at
// `base` when absent; otherwise the quantised groups at their compute dtype and stored bits.
// `router_is_linear`: the family's router is an nn.Linear, which "Linear"-targeted formats
// quantise unless ignored. Unknown methods, formats, keys and module patterns are errors.
Precision read_hf_precision(HfJsonReader& top, DType base, const ModelCard& card,
                            bool router_is_linear);

}  // namespace moesim::sim

// Internal to sim/model: the compressed-tensors quantization_config (llm-compressor's format):
// config groups whose targets ("Linear" or module patterns) get a weight scheme (int or float,
// group / channel / tensor / block scales, symmetric or not) and optionally 8-bit input
// activations; an ignore list. Bits per element: docs/models.md ("Quantised checkpoints").
#pragma once

#include "sim/model/hf_json_reader.h"
#include "sim/model/model_card.h"

namespace moesim::sim::hf_quant {

// Applies `q`, a quantization_config whose quant_method is "compressed-tensors", to *p
// (initialised at `base` for every group). Regex targets override "Linear" targets. Unknown
// keys, formats and strategies are errors naming their key path.
void read_compressed_tensors(HfJsonReader& q, DType base, const ModelCard& card,
                             bool router_is_linear, Precision* p);

}  // namespace moesim::sim::hf_quant

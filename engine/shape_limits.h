// Whether a trace's model fits what a backend's kernels can run (the CPU reference runs any
// shape; the CUDA kernels have the bounds of engine/cuda/kernel_limits.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/replay_plan.h"
#include "engine/step_trace.h"

namespace moesim::engine {

// One message per violation, naming the trace field ("model.layers[3].attention.head_dim_k: 192
// exceeds the CUDA kernels' limit of 128"); empty when `backend` can run every layer with the
// replay's `dtypes` (FP32 attention or KV cache, and FP8 experts whose widths are not multiples
// of 16, are refused for CUDA).
std::vector<std::string> shape_limit_violations(const TraceModel& model, std::string_view backend,
                                                const ReplayDtypes& dtypes);

}  // namespace moesim::engine

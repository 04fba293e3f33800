// Hardware figures of one GPU model: peak dense tensor FLOP/s per dtype, HBM capacity and
// bandwidth, and its streaming multiprocessors (the units communication kernels take from compute).
// Efficiencies (how close kernels get to these peaks) belong to the cost model, not here.
//
// The catalogue holds vendor datasheet figures (dense, never the 2x "with sparsity" numbers);
// docs/topologies.md cites the source of each entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moesim::sim {

// Tensor-core input dtypes with a datasheet peak. FP16 runs at the BF16 rate on every catalogued
// GPU, so it has no entry of its own.
enum class GpuDtype { kFp32, kTf32, kBf16, kFp8, kFp4 };
inline constexpr GpuDtype kAllGpuDtypes[] = {GpuDtype::kFp32, GpuDtype::kTf32, GpuDtype::kBf16,
                                             GpuDtype::kFp8, GpuDtype::kFp4};

// "fp32", "tf32", "bf16", "fp8", "fp4".
const char* gpu_dtype_name(GpuDtype dtype);

struct GpuSpec {
  // Catalogue name, e.g. "h800-sxm" (lowercase).
  std::string name;
  // Peak dense FLOP/s per dtype; 0 means the GPU has no tensor path for that dtype.
  // fp32 is the non-tensor (vector) FP32 rate; fp4 is NVFP4 on Blackwell, MXFP4 on CDNA4.
  double fp32_flops_per_s = 0;
  double tf32_flops_per_s = 0;
  double bf16_flops_per_s = 0;
  double fp8_flops_per_s = 0;
  double fp4_flops_per_s = 0;
  // HBM capacity in bytes (decimal GB x 1e9, as datasheets state it).
  int64_t hbm_bytes = 0;
  // Peak HBM bandwidth in bytes per second.
  double hbm_bytes_per_s = 0;
  // Streaming multiprocessors (NVIDIA SMs, AMD compute units), >= 1 in every parsed topology; 0 in
  // a spec built in code means "not stated". Communication kernels that run beside compute hold
  // some of them (docs/serving.md, "SM sharing").
  int32_t num_sms = 0;
  // Price of one GPU-hour in US dollars (the planner's cost figures, docs/sweeps.md); absent
  // unless the topology's [gpu] table gives price_usd_per_hour. The catalogue holds no prices.
  std::optional<double> price_usd_per_hour;
  // Where price_usd_per_hour is quoted from (publication or URL and the date read); "" without
  // a price. Printed beside the price.
  std::string price_source;

  // The peak for `dtype` (0 = unsupported).
  double peak_flops_per_s(GpuDtype dtype) const;
  bool operator==(const GpuSpec&) const = default;
};

// The catalogued spec named `name` (exact, lowercase), or nullopt.
std::optional<GpuSpec> find_gpu_spec(std::string_view name);
// Names of all catalogued GPUs, sorted.
std::vector<std::string> gpu_spec_names();

}  // namespace moesim::sim

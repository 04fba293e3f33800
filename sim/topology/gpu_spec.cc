#include "sim/topology/gpu_spec.h"

#include <algorithm>

#include "base/check.h"

namespace moesim::sim {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;

// Vendor datasheet figures, dense (sparsity halved away); no prices. Sources in
// docs/topologies.md.
std::vector<GpuSpec> catalogue() {
  std::vector<GpuSpec> specs;
  // NVIDIA H100 SXM5 datasheet: FP32 67 TF, TF32 494.7 (989.4 sparse), BF16 989.4, FP8 1978.9;
  // 80 GB HBM3 at 3.35 TB/s; 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper).
  specs.push_back({"h100-sxm", 67 * kTera, 494.7 * kTera, 989.4 * kTera, 1978.9 * kTera, 0,
                   static_cast<int64_t>(80 * kGiga), 3.35e12, 132, std::nullopt});
  // NVIDIA H800 SXM5: the H100 SXM5 compute die and memory (export variant with reduced NVLink,
  // which is a topology property, not a GPU one); 132 SMs (DeepSeek-V3 technical report, arXiv
  // 2412.19437, section 3.5.1: "the 132 SMs available in the H800 GPU").
  specs.push_back({"h800-sxm", 67 * kTera, 494.7 * kTera, 989.4 * kTera, 1978.9 * kTera, 0,
                   static_cast<int64_t>(80 * kGiga), 3.35e12, 132, std::nullopt});
  // NVIDIA H200 SXM: H100 compute (the same GH100 configuration, 132 SMs); 141 GB HBM3e at
  // 4.8 TB/s.
  specs.push_back({"h200-sxm", 67 * kTera, 494.7 * kTera, 989.4 * kTera, 1978.9 * kTera, 0,
                   static_cast<int64_t>(141 * kGiga), 4.8e12, 132, std::nullopt});
  // NVIDIA GB200 NVL72 datasheet, per Blackwell GPU (rack figures / 72, sparse figures / 2):
  // FP32 80 TF, TF32 1.25 PF, BF16 2.5 PF, FP8 5 PF, FP4 10 PF; 186 GB HBM3e (13.4 TB / 72) at
  // 8 TB/s (576 TB/s / 72); 148 SMs per Blackwell GPU (the B200's, as CUDA reports it).
  specs.push_back({"gb200", 80 * kTera, 1250 * kTera, 2500 * kTera, 5000 * kTera, 10000 * kTera,
                   static_cast<int64_t>(186 * kGiga), 8e12, 148, std::nullopt});
  // AMD Instinct MI355X datasheet: FP32 vector 157.3 TF, no TF32 matrix path, BF16 2516.6 TF,
  // FP8 5033.2 TF, MXFP4 10066.4 TF (all dense); 288 GB HBM3E at 8 TB/s; 256 compute units.
  specs.push_back({"mi355x", 157.3 * kTera, 0, 2516.6 * kTera, 5033.2 * kTera, 10066.4 * kTera,
                   static_cast<int64_t>(288 * kGiga), 8e12, 256, std::nullopt});
  return specs;
}

const std::vector<GpuSpec>& catalogue_instance() {
  static const std::vector<GpuSpec> kSpecs = catalogue();
  return kSpecs;
}

}  // namespace

const char* gpu_dtype_name(GpuDtype dtype) {
  switch (dtype) {
    case GpuDtype::kFp32:
      return "fp32";
    case GpuDtype::kTf32:
      return "tf32";
    case GpuDtype::kBf16:
      return "bf16";
    case GpuDtype::kFp8:
      return "fp8";
    case GpuDtype::kFp4:
      return "fp4";
  }
  MOESIM_CHECK(false, "unknown GpuDtype");
  return "";
}

double GpuSpec::peak_flops_per_s(GpuDtype dtype) const {
  switch (dtype) {
    case GpuDtype::kFp32:
      return fp32_flops_per_s;
    case GpuDtype::kTf32:
      return tf32_flops_per_s;
    case GpuDtype::kBf16:
      return bf16_flops_per_s;
    case GpuDtype::kFp8:
      return fp8_flops_per_s;
    case GpuDtype::kFp4:
      return fp4_flops_per_s;
  }
  MOESIM_CHECK(false, "unknown GpuDtype");
  return 0;
}

std::optional<GpuSpec> find_gpu_spec(std::string_view name) {
  for (const GpuSpec& spec : catalogue_instance()) {
    if (spec.name == name) return spec;
  }
  return std::nullopt;
}

std::vector<std::string> gpu_spec_names() {
  std::vector<std::string> names;
  for (const GpuSpec& spec : catalogue_instance()) names.push_back(spec.name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace moesim::sim

#include "sim/topology/gpu_spec.h"

#include <gtest/gtest.h>

namespace moesim::sim {
namespace {

TEST(GpuSpec, CatalogueHoldsDenseDatasheetFigures) {
  // Figures typed from the vendor datasheets (dense, i.e. half the "with sparsity" numbers).
  GpuSpec h200 = *find_gpu_spec("h200-sxm");
  EXPECT_DOUBLE_EQ(h200.bf16_flops_per_s, 989.4e12);
  EXPECT_DOUBLE_EQ(h200.fp8_flops_per_s, 1978.9e12);
  EXPECT_DOUBLE_EQ(h200.fp4_flops_per_s, 0);
  EXPECT_EQ(h200.hbm_bytes, 141'000'000'000);
  EXPECT_DOUBLE_EQ(h200.hbm_bytes_per_s, 4.8e12);

  GpuSpec h800 = *find_gpu_spec("h800-sxm");
  EXPECT_DOUBLE_EQ(h800.bf16_flops_per_s, 989.4e12);
  EXPECT_EQ(h800.hbm_bytes, 80'000'000'000);
  EXPECT_DOUBLE_EQ(h800.hbm_bytes_per_s, 3.35e12);
  GpuSpec h100 = *find_gpu_spec("h100-sxm");
  h100.name = h800.name;
  EXPECT_EQ(h100, h800);  // same die and memory; only NVLink (a topology property) differs

  GpuSpec gb200 = *find_gpu_spec("gb200");
  EXPECT_DOUBLE_EQ(gb200.bf16_flops_per_s, 2.5e15);
  EXPECT_DOUBLE_EQ(gb200.fp8_flops_per_s, 5e15);
  EXPECT_DOUBLE_EQ(gb200.fp4_flops_per_s, 10e15);
  EXPECT_DOUBLE_EQ(gb200.hbm_bytes_per_s, 8e12);

  GpuSpec mi355x = *find_gpu_spec("mi355x");
  EXPECT_DOUBLE_EQ(mi355x.bf16_flops_per_s, 2516.6e12);
  EXPECT_DOUBLE_EQ(mi355x.fp4_flops_per_s, 10066.4e12);
  EXPECT_DOUBLE_EQ(mi355x.tf32_flops_per_s, 0);
  EXPECT_EQ(mi355x.hbm_bytes, 288'000'000'000);

  // Streaming multiprocessors (AMD: compute units), docs/topologies.md.
  EXPECT_EQ(h100.num_sms, 132);
  EXPECT_EQ(h200.num_sms, 132);
  EXPECT_EQ(gb200.num_sms, 148);
  EXPECT_EQ(mi355x.num_sms, 256);
}

TEST(GpuSpec, PeakByDtypeReadsTheMatchingField) {
  GpuSpec s{"x", 1, 2, 3, 4, 5, 6, 7, 8, std::nullopt};
  EXPECT_EQ(s.peak_flops_per_s(GpuDtype::kFp32), 1);
  EXPECT_EQ(s.peak_flops_per_s(GpuDtype::kTf32), 2);
  EXPECT_EQ(s.peak_flops_per_s(GpuDtype::kBf16), 3);
  EXPECT_EQ(s.peak_flops_per_s(GpuDtype::kFp8), 4);
  EXPECT_EQ(s.peak_flops_per_s(GpuDtype::kFp4), 5);
  EXPECT_STREQ(gpu_dtype_name(GpuDtype::kFp8), "fp8");
}

TEST(GpuSpec, NamesAreSortedAndUnknownNamesAreAbsent) {
  EXPECT_EQ(gpu_spec_names(),
            (std::vector<std::string>{"gb200", "h100-sxm", "h200-sxm", "h800-sxm", "mi355x"}));
  for (const std::string& name : gpu_spec_names()) EXPECT_EQ(find_gpu_spec(name)->name, name);
  EXPECT_FALSE(find_gpu_spec("H800-SXM").has_value());
}

}  // namespace
}  // namespace moesim::sim

// The LibTorch adapter: zero-copy views of CPU tensors, strides, dtypes, module snapshots.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "genscope/error.hpp"
#include "genscope/torch.hpp"

TEST(TorchAdapter, ContiguousCpuTensorIsViewedInPlace) {
  at::Tensor t = at::arange(12, at::kFloat).view({3, 4});
  genscope::TorchTensorView v = genscope::to_view(t);
  EXPECT_EQ(v.view.data, t.data_ptr());
  EXPECT_EQ(v.view.shape, (std::vector<std::int64_t>{3, 4}));
  EXPECT_TRUE(v.view.strides.empty());
  EXPECT_EQ(v.view.dtype, genscope::DType::kF32);
  EXPECT_FALSE(v.copied_to_host);
  EXPECT_EQ(v.note, "");
  EXPECT_EQ(v.view.device, "cpu");
}

TEST(TorchAdapter, StridedTensorKeepsItsStrides) {
  at::Tensor t = at::arange(12, at::kDouble).view({3, 4}).t();
  genscope::TorchTensorView v = genscope::to_view(t);
  EXPECT_EQ(v.view.data, t.data_ptr());
  EXPECT_EQ(v.view.strides, (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(v.view.dtype, genscope::DType::kF64);
}

TEST(TorchAdapter, DtypesMapAndComplexIsRejected) {
  EXPECT_EQ(genscope::to_dtype(at::kBFloat16), genscope::DType::kBF16);
  EXPECT_EQ(genscope::to_dtype(at::kHalf), genscope::DType::kF16);
  EXPECT_EQ(genscope::to_dtype(at::kByte), genscope::DType::kU8);
  try {
    genscope::to_view(at::zeros({2}, at::kComplexFloat));
    FAIL() << "expected UnsupportedDType";
  } catch (const genscope::Error& e) {
    EXPECT_EQ(e.name(), "UnsupportedDType");
  }
}

#ifdef GENSCOPE_TORCH_HAS_MODEL_SNAPSHOT
TEST(TorchAdapter, SnapshotListsParametersAndBuffers) {
  torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
  genscope::ModelSnapshot s = genscope::snapshot_module(*net, "Net", true);
  EXPECT_EQ(s.class_name, "Net");
  ASSERT_EQ(s.parameters.count("0.weight"), 1u);
  EXPECT_EQ(s.parameters.at("0.weight").shape, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(s.parameters.at("0.weight").bytes, 48u);
  EXPECT_TRUE(s.parameters.at("0.weight").content_hash.has_value());
  EXPECT_EQ(s.parameters.count("1.running_mean"), 1u);  // buffers too
  EXPECT_EQ(s.device, "cpu");
}
#endif

#ifndef GENSCOPE_LIBTORCH_CUDA
TEST(TorchAdapter, NoCudaAllocatorWithoutCuda) {
  EXPECT_EQ(genscope::make_cuda_allocator_source(0), nullptr);
}
#endif

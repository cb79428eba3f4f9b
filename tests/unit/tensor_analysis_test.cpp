// tensor_analysis_json: the "tensor" attachment layout (docs/tensor-analysis.md).
#include "genscope/tensor_analysis.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "genscope/error.hpp"

namespace genscope {
namespace {

std::vector<std::uint16_t> bf16_ramp(std::size_t n) {
  std::vector<std::uint16_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float f = std::sin(static_cast<float>(i) * 0.1f);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    out[i] = static_cast<std::uint16_t>(bits >> 16);
  }
  return out;
}

TEST(TensorAnalysisJson, ConditioningWithChecks) {
  const auto data = bf16_ramp(77 * 2048);
  TensorView v{.data = data.data(), .shape = {1, 77, 2048}, .dtype = DType::kBF16,
               .device = "cuda:0"};
  const nlohmann::json j = tensor_analysis_json(
      v, TensorRole::kConditioning,
      {.declared_family = ModelFamily::kSDXL, .expected_device = "cuda",
       .expected_dtype = DType::kF16, .memory_threshold_bytes = 1 << 20});
  EXPECT_EQ(j["schema"], "genscope.tensor/1");
  EXPECT_EQ(j["role"], "conditioning");
  EXPECT_EQ(j["dtype"], "BF16");
  EXPECT_EQ(j["device"], "cuda:0");
  EXPECT_EQ(j["shape"], nlohmann::json({1, 77, 2048}));
  EXPECT_TRUE(j["strides"].is_null());
  EXPECT_EQ(j["stats"]["numel"], 77 * 2048);
  EXPECT_EQ(j["stats"]["bytes"], 77 * 2048 * 2);
  EXPECT_EQ(j["stats"]["hash"].get<std::string>().size(), 16u);
  EXPECT_EQ(j["classification"]["kind"], "conditioning");
  EXPECT_EQ(j["classification"]["family"], "SDXL");
  ASSERT_EQ(j["checks"].size(), 4u);
  EXPECT_EQ(j["checks"][0]["name"], "conditioning_width");
  EXPECT_TRUE(j["checks"][0]["passed"]);
  EXPECT_TRUE(j["checks"][1]["passed"]);   // cuda:0 on "cuda"
  EXPECT_FALSE(j["checks"][2]["passed"]);  // BF16 is not F16
  EXPECT_TRUE(j["checks"][3]["passed"]);   // 315 KB <= 1 MiB
  EXPECT_TRUE(j["flags"].empty());
  const TensorStats s = compute_stats(v);
  EXPECT_DOUBLE_EQ(j["stats"]["mean"].get<double>(), s.mean);
}

TEST(TensorAnalysisJson, NanLatentIsFlaggedAndNullsAreJson) {
  std::vector<float> data(16 * 4 * 8 * 8, std::nanf(""));
  TensorView v{.data = data.data(), .shape = {1, 16, 4, 8, 8}};
  const nlohmann::json j = tensor_analysis_json(
      v, TensorRole::kLatent,
      {.declared_family = ModelFamily::kWan21, .source = {.height = 64, .width = 64, .frames = 13}});
  EXPECT_EQ(j["classification"]["layout"], "video (B,C,T,H,W)");
  EXPECT_DOUBLE_EQ(j["classification"]["spatial_ratio"].get<double>(), 64.0);
  EXPECT_DOUBLE_EQ(j["classification"]["temporal_ratio"].get<double>(), 13.0 / 4.0);
  EXPECT_TRUE(j["stats"]["mean"].is_null());
  EXPECT_EQ(j["stats"]["nan_count"], 16 * 4 * 8 * 8);
  ASSERT_FALSE(j["flags"].empty());
  EXPECT_EQ(j["flags"][0]["name"], "non_finite");
  EXPECT_EQ(j["flags"][0]["severity"], "error");
  bool saw_family = false;
  for (const auto& c : j["checks"]) {
    if (c["name"] == "latent_family") saw_family = c["passed"].get<bool>();
    if (c["name"] == "latent_size") EXPECT_TRUE(c["passed"].get<bool>());
  }
  EXPECT_TRUE(saw_family);
  EXPECT_TRUE(nlohmann::json::parse(j.dump()).is_object());  // nulls, not NaN tokens
}

TEST(TensorAnalysisJson, BlackImageAndComparison) {
  std::vector<std::uint8_t> img(3 * 4 * 4, 0);
  TensorView v{.data = img.data(), .shape = {1, 3, 4, 4}, .dtype = DType::kU8};
  const nlohmann::json j = tensor_analysis_json(v, TensorRole::kImage);
  EXPECT_TRUE(j["classification"].is_null());
  ASSERT_EQ(j["flags"].size(), 1u);
  EXPECT_EQ(j["flags"][0]["name"], "all_zeros");
  std::vector<std::uint8_t> other = img;
  other[5] = 2;
  TensorView w{.data = other.data(), .shape = {1, 3, 4, 4}, .dtype = DType::kU8};
  const nlohmann::json c = comparison_json(compare_tensors(v, w));
  EXPECT_FALSE(c["allclose"]);
  EXPECT_EQ(c["worst_index"], nlohmann::json({0, 0, 1, 1}));
  EXPECT_EQ(c["max_rel_error"], 1.0);
  EXPECT_EQ(comparison_json(compare_tensors(v, v))["psnr_db"], "inf");
}

TEST(TensorAnalysisJson, InvalidViewThrowsNamedError) {
  TensorView v{.data = nullptr, .shape = {2}};
  try {
    (void)tensor_analysis_json(v, TensorRole::kOther);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "NullData");
  }
}

}  // namespace
}  // namespace genscope

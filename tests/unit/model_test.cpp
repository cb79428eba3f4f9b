// Tests of src/model: snapshots from safetensors, JSON round trip, snapshot and streaming
// file diffs (norms checked against NumPy).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "genscope/error.hpp"
#include "genscope/lora.hpp"
#include "genscope/model_diff.hpp"
#include "genscope/model_snapshot.hpp"
#include "model/float_convert.hpp"
#include "unit/model_data.hpp"

namespace genscope {
namespace {

using testing::model_file;

TEST(ModelSnapshot, ReadsParameterTableAndHashes) {
  const ModelSnapshot s = snapshot_from_safetensors(model_file("sd15.safetensors"), true);
  const auto file = SafetensorsFile::open(model_file("sd15.safetensors"));
  ASSERT_EQ(s.parameters.size(), file.entries().size());
  std::uint64_t bytes = 0;
  for (const auto& e : file.entries()) bytes += e.nbytes();
  EXPECT_EQ(s.total_bytes(), bytes);
  const auto& p = s.parameters.at("model.diffusion_model.input_blocks.0.0.weight");
  EXPECT_EQ(p.shape, (std::vector<std::int64_t>{8, 4, 3, 3}));
  EXPECT_EQ(p.dtype, DType::kF16);
  EXPECT_EQ(p.bytes, 8u * 4 * 3 * 3 * 2);
  ASSERT_TRUE(p.content_hash);
  const ModelSnapshot again = snapshot_from_safetensors(model_file("sd15.safetensors"), true);
  EXPECT_EQ(*again.parameters.at("model.diffusion_model.input_blocks.0.0.weight").content_hash, *p.content_hash);
  EXPECT_NE(*s.parameters.at("model.diffusion_model.input_blocks.0.0.bias").content_hash, *p.content_hash);
  EXPECT_FALSE(snapshot_from_safetensors(model_file("sd15.safetensors"), false)
                   .parameters.begin()->second.content_hash.has_value());
}

TEST(ModelSnapshot, JsonRoundTrip) {
  ModelSnapshot s = snapshot_from_safetensors(model_file("sd15_lokr.safetensors"), true);
  s.device = "cuda:0";
  s.load_device = "cuda:0";
  s.offload_device = "cpu";
  s.patches_count = 3;
  s.patches_uuid = "0b7c6c8e-8f3a-4d53-9b1c-3f5a7e2d9c10";
  const nlohmann::json j = s;
  const ModelSnapshot back = j.get<ModelSnapshot>();
  EXPECT_EQ(nlohmann::json(back), j);
  EXPECT_EQ(back.parameters.size(), s.parameters.size());
  EXPECT_EQ(back.parameters.begin()->second.content_hash, s.parameters.begin()->second.content_hash);
  nlohmann::json bad = j;
  bad["parameters"].begin().value()["dtype"] = "F7";
  try {
    (void)bad.get<ModelSnapshot>();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidSnapshotJson");
  }
  EXPECT_THROW((void)nlohmann::json::object().get<ModelSnapshot>(), Error);
}

TEST(ModelDiff, SnapshotDiffUsesHashesAndDevices) {
  ModelSnapshot a = snapshot_from_safetensors(model_file("sd15.safetensors"), true);
  ModelSnapshot b = snapshot_from_safetensors(model_file("expected_sd15_kohya.safetensors"), true);
  b.id = a.id;
  b.device = "cuda:0";
  b.parameters.erase("first_stage_model.decoder.conv_out.bias");
  b.parameters["extra.weight"] = ParameterInfo{{2}, DType::kF32, "cpu", 8, 1};
  b.parameters.at("first_stage_model.decoder.conv_out.weight").device = "cuda:0";
  const ModelDiff d = diff_snapshots(a, b);
  EXPECT_FALSE(d.identity.model_cloned);
  EXPECT_TRUE(d.placement.model_device_changed);
  EXPECT_FALSE(d.placement.load_device_changed);
  EXPECT_EQ(d.weights.keys_removed, std::vector<std::string>{"first_stage_model.decoder.conv_out.bias"});
  EXPECT_EQ(d.weights.keys_added, std::vector<std::string>{"extra.weight"});
  std::ifstream in(model_file("expected_sd15_kohya_diff.json"));
  const auto expected = nlohmann::json::parse(in);
  EXPECT_EQ(d.weights.values_changed, expected.size());
  bool device_change_seen = false;
  for (const auto& c : d.weights.changes) {
    if (c.key == "first_stage_model.decoder.conv_out.weight") device_change_seen = c.device_changed;
  }
  EXPECT_TRUE(device_change_seen);
}

TEST(ModelDiff, StreamingFileDiffMatchesNumPyNorms) {
  const ModelDiff d = diff_safetensors(model_file("sd15.safetensors"), model_file("expected_sd15_kohya.safetensors"));
  std::ifstream in(model_file("expected_sd15_kohya_diff.json"));
  const auto expected = nlohmann::json::parse(in);
  EXPECT_TRUE(d.weights.keys_added.empty());
  EXPECT_TRUE(d.weights.keys_removed.empty());
  EXPECT_EQ(d.weights.values_changed, expected.size());
  ASSERT_EQ(d.weights.changes.size(), expected.size());
  for (const auto& c : d.weights.changes) {
    ASSERT_TRUE(expected.contains(c.key)) << c.key;
    const double dn = expected[c.key][0], wn = expected[c.key][1];
    EXPECT_EQ(c.value_changed, 1);
    EXPECT_NEAR(c.delta_norm, dn, 1e-6 * dn) << c.key;
    EXPECT_NEAR(c.relative_delta, dn / wn, 1e-6 * dn / wn) << c.key;
  }
  const nlohmann::json j = d;
  EXPECT_EQ(j["weights"]["values_changed"], expected.size());

  const ModelDiff same = diff_safetensors(model_file("sd15.safetensors"), model_file("sd15.safetensors"));
  EXPECT_EQ(same.weights.values_changed, 0u);
  EXPECT_TRUE(same.weights.changes.empty());
  EXPECT_EQ(same.weights.keys_common, same.weights.total_keys_original);
}

TEST(ModelDiff, DtypeChangeComparesValues) {
  // sd15_diffusers holds the same UNet values as sd15, renamed and widened to F32.
  const ModelDiff d = diff_safetensors(model_file("sd15.safetensors"), model_file("sd15_diffusers.safetensors"));
  EXPECT_EQ(d.weights.keys_common, 0u);
  EXPECT_GT(d.weights.keys_added.size(), 600u);
  EXPECT_GT(d.weights.keys_removed.size(), 600u);
}

TEST(FloatConvert, HalfAndBf16RoundTrip) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333333f}) {
    EXPECT_EQ(detail::f16_to_f32(detail::f32_to_f16(v)), static_cast<float>(static_cast<_Float16>(v))) << v;
  }
  EXPECT_TRUE(std::isinf(detail::f16_to_f32(detail::f32_to_f16(1e6f))));
  EXPECT_TRUE(std::isnan(detail::f16_to_f32(detail::f32_to_f16(NAN))));
  EXPECT_EQ(detail::bf16_to_f32(detail::f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);  // tie to even
  EXPECT_EQ(detail::bf16_to_f32(detail::f32_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
}

}  // namespace
}  // namespace genscope

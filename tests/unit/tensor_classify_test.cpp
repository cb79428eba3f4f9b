// Conditioning and latent classification (docs/domain.md §1–§2), health flags, checks.
#include "genscope/tensor_classify.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace genscope {
namespace {

using Shape = std::vector<std::int64_t>;

std::set<ModelFamily> families(const std::vector<FamilyCandidate>& c) {
  std::set<ModelFamily> out;
  for (const FamilyCandidate& f : c) out.insert(f.family);
  return out;
}

std::set<ModelFamily> cond(Shape shape, std::optional<Shape> pooled = std::nullopt) {
  return families(classify_conditioning(shape, pooled).candidates);
}

TEST(ClassifyConditioning, UniqueWhenTheEvidenceIsUnique) {
  using F = ModelFamily;
  EXPECT_EQ(cond({1, 77, 768}), std::set<F>{F::kSD1});
  EXPECT_EQ(cond({2, 154, 768}), std::set<F>{F::kSD1});  // long prompt: two chunks
  EXPECT_EQ(cond({1, 77, 1024}), std::set<F>{F::kSD2});
  EXPECT_EQ(cond({1, 77, 2048}), std::set<F>{F::kSDXL});
  EXPECT_EQ(cond({1, 77, 1280}), std::set<F>{F::kSDXLRefiner});
  EXPECT_EQ(cond({1, 2048}), std::set<F>{F::kSD3});  // rank 2: SD3 pooled, not SDXL
  EXPECT_EQ(cond({1, 333, 4096}, Shape{1, 2048}), std::set<F>{F::kSD3});
  EXPECT_EQ(cond({1, 154, 4096}, Shape{1, 2048}), std::set<F>{F::kSD3});
  EXPECT_EQ(cond({1, 512, 4096}, Shape{1, 768}), std::set<F>{F::kFlux1Dev});
  EXPECT_EQ(cond({1, 300, 3584}), std::set<F>{F::kQwenImage});
  EXPECT_EQ(cond({1, 77, 2048}, Shape{1, 1280}), std::set<F>{F::kSDXL});
  EXPECT_TRUE(classify_conditioning(Shape{1, 77, 768}).unique());
}

TEST(ClassifyConditioning, AmbiguousShapesGiveCandidateSets) {
  using F = ModelFamily;
  // LTX-2.3's video context is 4096 wide too, up to 1024 tokens: alone, a context of <= 1024
  // tokens without a pooled companion may be it.
  EXPECT_EQ(cond({1, 512, 4096}), (std::set<F>{F::kFlux1Dev, F::kWan21, F::kLtx23}));
  EXPECT_EQ(cond({1, 256, 4096}),
            (std::set<F>{F::kFlux1Schnell, F::kHunyuanVideo, F::kLtx23}));
  EXPECT_EQ(cond({1, 128, 4096}), (std::set<F>{F::kLtxVideo, F::kLtx23}));
  EXPECT_EQ(cond({1, 333, 4096}), (std::set<F>{F::kSD3, F::kLtx23}));
  EXPECT_EQ(cond({1, 1024, 4096}), std::set<F>{F::kLtx23});
  EXPECT_EQ(cond({1, 256, 4096}, Shape{1, 768}),
            (std::set<F>{F::kFlux1Schnell, F::kHunyuanVideo}));
  EXPECT_EQ(cond({1, 1280}), (std::set<F>{F::kSDXL, F::kSDXLRefiner}));
  EXPECT_EQ(cond({1, 768}), (std::set<F>{F::kFlux1Dev, F::kFlux1Schnell, F::kHunyuanVideo}));
  const auto c = classify_conditioning(Shape{1, 512, 4096});
  EXPECT_FALSE(c.unique());
  EXPECT_EQ(c.role, "context");
  EXPECT_EQ(c.tokens, 512);
  EXPECT_FALSE(c.notes.empty());
}

TEST(ClassifyConditioning, UnknownAndMismatchedShapes) {
  EXPECT_TRUE(cond({1, 77, 999}).empty());
  EXPECT_TRUE(cond({1, 2, 3, 4}).empty());
  EXPECT_EQ(classify_conditioning(Shape{1, 2, 3, 4}).role, "unknown");
  EXPECT_TRUE(cond({1, 100, 768}).empty());  // SD1 context is chunks of 77
  // A pooled companion that fits no candidate keeps the width evidence and says so.
  const auto c = classify_conditioning(Shape{1, 512, 4096}, Shape{1, 1024});
  EXPECT_EQ(c.candidates.size(), 3u);
  EXPECT_FALSE(c.notes.empty());
}

TEST(ClassifyLatent, ImageVideoPackedLayouts) {
  using F = ModelFamily;
  auto sd = classify_latent(Shape{1, 4, 64, 64});
  EXPECT_EQ(sd.layout, LatentLayout::kImage);
  EXPECT_EQ(families(sd.candidates), (std::set<F>{F::kSD1, F::kSD2, F::kSDXL}));
  EXPECT_EQ(families(classify_latent(Shape{1, 16, 128, 128}).candidates),
            (std::set<F>{F::kSD3, F::kFlux1Dev, F::kFlux1Schnell}));
  auto wan = classify_latent(Shape{1, 16, 21, 60, 104});
  EXPECT_EQ(wan.layout, LatentLayout::kVideo);
  EXPECT_EQ(wan.frames, 21);
  EXPECT_EQ(families(wan.candidates), (std::set<F>{F::kWan21, F::kHunyuanVideo}));
  EXPECT_EQ(families(classify_latent(Shape{1, 48, 31, 44, 80}).candidates),
            std::set<F>{F::kWan22TI2V});
  // 128 channels, 5-D: the LTX video VAE, LTX-Video's, LTX-2.0's and LTX-2.3's alike.
  EXPECT_EQ(families(classify_latent(Shape{1, 128, 16, 16, 22}).candidates),
            (std::set<F>{F::kLtxVideo, F::kLtx2, F::kLtx23}));
  EXPECT_EQ(families(classify_latent(Shape{1, 16, 1, 128, 128}).candidates),
            (std::set<F>{F::kWan21, F::kQwenImage, F::kHunyuanVideo}));
  auto packed = classify_latent(Shape{1, 4096, 64});
  EXPECT_EQ(packed.layout, LatentLayout::kPacked);
  EXPECT_EQ(families(packed.candidates),
            (std::set<F>{F::kFlux1Dev, F::kFlux1Schnell, F::kQwenImage}));
}

TEST(ClassifyLatent, SeedLayoutIsFlagged) {
  // The seeds' (B,F,C,H,W) example (1,4,4,64,64): 4-channel families have no video VAE.
  auto c = classify_latent(Shape{1, 16, 4, 64, 64});  // looks like F=16, C=4
  EXPECT_TRUE(c.candidates.empty() ||
              std::none_of(c.candidates.begin(), c.candidates.end(),
                           [](const FamilyCandidate& f) { return f.family == ModelFamily::kSD1; }));
  auto seeds = classify_latent(Shape{1, 17, 16, 60, 104});
  EXPECT_TRUE(seeds.candidates.empty());
  ASSERT_FALSE(seeds.notes.empty());
  EXPECT_NE(seeds.notes[0].find("(B,C,T,H,W)"), std::string::npos);
}

TEST(ClassifyLatent, SourceSizeRatiosAndTemporalRules) {
  using F = ModelFamily;
  // Wan 2.1 480x832, 81 frames -> T = (81+3)/4 = 21, 60x104.
  auto wan = classify_latent(Shape{1, 16, 21, 60, 104}, {.height = 480, .width = 832, .frames = 81});
  EXPECT_DOUBLE_EQ(wan.spatial_ratio, 64.0);
  EXPECT_DOUBLE_EQ(wan.temporal_ratio, 81.0 / 21.0);
  EXPECT_EQ(families(wan.candidates), (std::set<F>{F::kWan21, F::kHunyuanVideo}));
  ASSERT_EQ(wan.checks.size(), 2u);
  EXPECT_TRUE(wan.checks[0].passed);
  // LTX: 121 frames -> (121+7)/8 = 16 latent frames, /32 spatially.
  EXPECT_EQ(expected_latent_frames(F::kLtxVideo, 121), 16);
  EXPECT_EQ(expected_latent_frames(F::kWan21, 81), 21);
  EXPECT_EQ(expected_latent_frames(F::kWan21, 1), 1);
  EXPECT_EQ(expected_latent_frames(F::kSDXL, 5), 1);
  auto ltx = classify_latent(Shape{1, 128, 16, 16, 22}, {.height = 512, .width = 704, .frames = 121});
  EXPECT_DOUBLE_EQ(ltx.spatial_ratio, 1024.0);
  ASSERT_EQ(ltx.checks.size(), 3u);  // LTX-Video, LTX-2.0, LTX-2.3: the same VAE factors
  EXPECT_TRUE(ltx.checks[0].passed && ltx.checks[1].passed);
  // A wrong frame count fails the size check for every candidate.
  auto bad = classify_latent(Shape{1, 16, 20, 60, 104}, {.height = 480, .width = 832, .frames = 81});
  ASSERT_FALSE(bad.checks.empty());
  EXPECT_FALSE(bad.checks[0].passed);
  EXPECT_FALSE(bad.notes.empty());
  // Packed Flux 1024x1024 -> (64)(64) = 4096 tokens; ratio per latent pixel 64.
  auto flux = classify_latent(Shape{1, 4096, 64}, {.height = 1024, .width = 1024});
  EXPECT_DOUBLE_EQ(flux.spatial_ratio, 64.0);
  EXPECT_TRUE(flux.checks[0].passed);
  // LTX-Video as its diffusers transformer sees it: (B, N, 128) tokens of 1x1x1 patches over
  // the latent frames. 512x704, 121 frames -> 16 x 16 x 22 = 5632 tokens; 1024 pixels each.
  auto ltx_tokens = classify_latent(Shape{1, 5632, 128}, {.height = 512, .width = 704, .frames = 121});
  EXPECT_EQ(ltx_tokens.layout, LatentLayout::kPacked);
  EXPECT_EQ(ltx_tokens.channels, 128);
  EXPECT_EQ(families(ltx_tokens.candidates), (std::set<F>{F::kLtxVideo, F::kLtx2, F::kLtx23}));
  ASSERT_EQ(ltx_tokens.checks.size(), 3u);
  EXPECT_TRUE(ltx_tokens.checks[0].passed) << ltx_tokens.checks[0].reason;
  EXPECT_TRUE(ltx_tokens.checks[1].passed) << ltx_tokens.checks[1].reason;
  EXPECT_DOUBLE_EQ(ltx_tokens.spatial_ratio, 1024.0);
  // One latent frame short: the size check fails.
  auto ltx_short = classify_latent(Shape{1, 5280, 128}, {.height = 512, .width = 704, .frames = 121});
  ASSERT_EQ(ltx_short.checks.size(), 3u);
  EXPECT_FALSE(ltx_short.checks[0].passed || ltx_short.checks[1].passed);
  // 128-wide tokens are LTX's or Flux.2's (2x2 patches of 32 channels); 64-wide ones are
  // never LTX.
  EXPECT_EQ(families(classify_latent(Shape{1, 8, 128}).candidates),
            (std::set<F>{F::kLtxVideo, F::kLtx2, F::kLtx23, F::kFlux2, F::kFlux2Klein4B, F::kFlux2Klein9B}));
  EXPECT_EQ(families(classify_latent(Shape{1, 8, 64}).candidates),
            (std::set<F>{F::kFlux1Dev, F::kFlux1Schnell, F::kQwenImage}));
  auto sdxl = classify_latent(Shape{1, 4, 128, 128}, {.height = 1024, .width = 1024});
  EXPECT_EQ(sdxl.candidates.size(), 3u);
  auto wrong = classify_latent(Shape{1, 4, 128, 128}, {.height = 512, .width = 512});
  EXPECT_FALSE(wrong.checks[0].passed);
}

TEST(Health, FlagsNonFiniteZerosAndStdBand) {
  TensorStats s;
  s.numel = 100;
  s.finite_count = 98;
  s.nan_count = 2;
  s.std = 1.0;
  auto flags = tensor_health(s);
  ASSERT_EQ(flags.size(), 1u);
  EXPECT_EQ(flags[0].name, "non_finite");
  TensorStats z;
  z.numel = z.finite_count = z.zero_count = 10;
  EXPECT_EQ(tensor_health(z)[0].name, "all_zeros");
  std::vector<FamilyCandidate> sd1{{ModelFamily::kSD1, ""}};
  TensorStats ok;
  ok.numel = ok.finite_count = 1000;
  ok.std = 5.4;  // raw SD1 latent, ~1/0.18215
  EXPECT_TRUE(latent_health(ok, sd1).empty());
  ok.std = 1.0;  // normalised
  EXPECT_TRUE(latent_health(ok, sd1).empty());
  ok.std = 0.01;  // collapsed
  ASSERT_EQ(latent_health(ok, sd1).size(), 1u);
  EXPECT_EQ(latent_health(ok, sd1)[0].name, "latent_std_out_of_band");
  ok.std = 300;  // exploding
  EXPECT_EQ(latent_health(ok, {}).size(), 1u);
}

TEST(Checks, ValidationLines) {
  EXPECT_TRUE(check_conditioning_family(Shape{1, 77, 2048}, ModelFamily::kSDXL).passed);
  auto seeds_wrong = check_conditioning_family(Shape{1, 512, 2048}, ModelFamily::kWan21);
  EXPECT_FALSE(seeds_wrong.passed);
  EXPECT_EQ(seeds_wrong.name, "conditioning_width");
  EXPECT_TRUE(check_conditioning_family(Shape{1, 2048}, ModelFamily::kSD3).passed);
  EXPECT_FALSE(check_conditioning_family(Shape{1, 768}, ModelFamily::kWan21).passed);
  EXPECT_TRUE(check_device("cuda:1", "cuda").passed);
  EXPECT_FALSE(check_device("cpu", "cuda:0").passed);
  EXPECT_FALSE(check_device("cuda:1", "cuda:0").passed);
  EXPECT_TRUE(check_dtype(DType::kBF16, DType::kBF16).passed);
  EXPECT_FALSE(check_dtype(DType::kF32, DType::kF16).passed);
  EXPECT_TRUE(check_memory(100, 100).passed);
  EXPECT_FALSE(check_memory(101, 100).passed);
}

TEST(Families, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(ModelFamily::kLtx23); ++i) {
    const auto f = static_cast<ModelFamily>(i);
    EXPECT_EQ(parse_family(family_name(f)), f) << family_name(f);
  }
  EXPECT_EQ(parse_family("flux-dev"), ModelFamily::kFlux1Dev);
  EXPECT_EQ(parse_family("SDXL"), ModelFamily::kSDXL);
  EXPECT_FALSE(parse_family("dalle").has_value());
  EXPECT_EQ(spatial_factor(ModelFamily::kWan22TI2V), 16);
  EXPECT_EQ(latent_channels(ModelFamily::kLtxVideo), 128);
  EXPECT_EQ(context_width(ModelFamily::kWan21), 4096);
  EXPECT_EQ(context_width(ModelFamily::kFlux2), 15360);
  EXPECT_EQ(latent_channels(ModelFamily::kHunyuanVideo15), 32);
  EXPECT_EQ(spatial_factor(ModelFamily::kHunyuanVideo15), 16);
  // LTX-2: Gemma-3-12B's 3840 after the text connectors; LTX's video VAE (128 channels, 32 x 8).
  EXPECT_EQ(parse_family("ltx2"), ModelFamily::kLtx2);  // the series' alias: its first
  EXPECT_EQ(parse_family("LTX-2"), ModelFamily::kLtx2);
  EXPECT_EQ(parse_family("ltx2.0"), ModelFamily::kLtx2);
  EXPECT_EQ(parse_family("ltx-2.3"), ModelFamily::kLtx23);
  EXPECT_EQ(audio_context_width(ModelFamily::kLtx2), 3840);
  // LTX-2.3: per-modality connectors, a 4096-wide video and a 2048-wide audio context.
  EXPECT_EQ(context_width(ModelFamily::kLtx23), 4096);
  EXPECT_EQ(audio_context_width(ModelFamily::kLtx23), 2048);
  EXPECT_EQ(audio_context_width(ModelFamily::kLtxVideo), 0);
  EXPECT_EQ(latent_channels(ModelFamily::kLtx23), 128);
  EXPECT_EQ(expected_latent_frames(ModelFamily::kLtx23, 121), 16);
  EXPECT_EQ(parse_family("ltx"), ModelFamily::kLtxVideo);  // "ltx" stays LTX-Video
  EXPECT_EQ(context_width(ModelFamily::kLtx2), 3840);
  EXPECT_EQ(latent_channels(ModelFamily::kLtx2), 128);
  EXPECT_EQ(spatial_factor(ModelFamily::kLtx2), 32);
  EXPECT_EQ(expected_latent_frames(ModelFamily::kLtx2, 121), 16);
}

TEST(Families, AliasesNameSeveralFamilies) {
  using F = ModelFamily;
  EXPECT_EQ(families_named("wan2.2"), (std::vector<F>{F::kWan21, F::kWan22TI2V}));
  EXPECT_EQ(families_named("Wan22"), (std::vector<F>{F::kWan21, F::kWan22TI2V}));
  EXPECT_EQ(families_named("flux2-klein"), (std::vector<F>{F::kFlux2Klein4B, F::kFlux2Klein9B}));
  EXPECT_EQ(families_named("wan2.1"), std::vector<F>{F::kWan21});
  EXPECT_TRUE(families_named("dalle").empty());
  EXPECT_EQ(parse_family("wan2.2"), F::kWan21);  // the first of the alias
  // "ltx2" / "ltx-2" (LTX-2.0's display name too) is the series: LTX-2.0 or LTX-2.3.
  EXPECT_EQ(families_named("ltx2"), (std::vector<F>{F::kLtx2, F::kLtx23}));
  EXPECT_EQ(families_named("LTX-2"), (std::vector<F>{F::kLtx2, F::kLtx23}));
  EXPECT_EQ(families_named("LTX-2.3"), std::vector<F>{F::kLtx23});
  EXPECT_EQ(families_named("ltx"), std::vector<F>{F::kLtxVideo});
}

TEST(ClassifyConditioning, NewFamilies) {
  using F = ModelFamily;
  EXPECT_EQ(cond({1, 512, 15360}), std::set<F>{F::kFlux2});
  EXPECT_EQ(cond({1, 512, 7680}), std::set<F>{F::kFlux2Klein4B});
  EXPECT_EQ(cond({1, 512, 12288}), std::set<F>{F::kFlux2Klein9B});
  EXPECT_EQ(cond({1, 1000, 3584}), (std::set<F>{F::kQwenImage, F::kHunyuanVideo15}));
  EXPECT_EQ(cond({1, 144, 3584}), std::set<F>{F::kQwenImage});
  EXPECT_TRUE(cond({1, 300, 15360}).empty());  // Flux.2 pads to 512
  // LTX-2: 3840-wide context (Gemma 3 through the connectors), up to max_sequence_length 1024.
  EXPECT_EQ(cond({2, 1024, 3840}), std::set<F>{F::kLtx2});
  EXPECT_EQ(cond({1, 128, 3840}), std::set<F>{F::kLtx2});
  EXPECT_TRUE(cond({1, 1025, 3840}).empty());
}

std::set<ModelFamily> latent(Shape shape, SourceSize source = {}) {
  return families(classify_latent(shape, source).candidates);
}

TEST(ClassifyLatent, NewFamilies) {
  using F = ModelFamily;
  // Flux.2: 32 channels, 2x2 patches -> 128-wide tokens, shared in width with LTX's 1x1x1.
  EXPECT_EQ(latent({1, 64, 128}), (std::set<F>{F::kLtxVideo, F::kLtx2, F::kLtx23, F::kFlux2,
                                               F::kFlux2Klein4B, F::kFlux2Klein9B}));
  EXPECT_EQ(latent({1, 64, 128}, {128, 128, 0}),
            (std::set<F>{F::kFlux2, F::kFlux2Klein4B, F::kFlux2Klein9B}));  // 8x8 tokens of 16 px
  // 9 frames: LTX's 2 latent frames x 2 x 2 tokens; Flux.2's are images, out for a video.
  EXPECT_EQ(latent({1, 8, 128}, {64, 64, 9}), (std::set<F>{F::kLtxVideo, F::kLtx2, F::kLtx23}));
  EXPECT_EQ(latent({1, 16, 128}, {64, 64, 0}),
            (std::set<F>{F::kFlux2, F::kFlux2Klein4B, F::kFlux2Klein9B}));  // 4x4 tokens
  EXPECT_EQ(latent({1, 32, 8, 8}), (std::set<F>{F::kFlux2, F::kFlux2Klein4B, F::kFlux2Klein9B}));
  EXPECT_EQ(latent({1, 32, 3, 4, 4}), std::set<F>{F::kHunyuanVideo15});
  EXPECT_EQ(latent({1, 32, 3, 4, 4}, {64, 64, 9}), std::set<F>{F::kHunyuanVideo15});
  EXPECT_EQ(latent({1, 48, 3, 4, 4}), std::set<F>{F::kWan22TI2V});
}

FamilyVerdict verdict(Shape context, Shape pooled, Shape latent_shape, SourceSize source = {},
                      std::optional<Shape> audio = std::nullopt) {
  return classify_pipeline({context, pooled, latent_shape, source, audio});
}

TEST(ClassifyPipeline, EveryTensorNarrowsTheVerdict) {
  using F = ModelFamily;
  // Flux.1-dev and Wan share 512 x 4096: the pooled vector (or its absence) and the latents
  // tell them apart.
  EXPECT_EQ(families(verdict({1, 512, 4096}, {1, 768}, {1, 16, 64}).candidates),
            std::set<F>{F::kFlux1Dev});
  EXPECT_EQ(families(verdict({1, 512, 4096}, {}, {1, 16, 3, 4, 4}).candidates),
            std::set<F>{F::kWan21});
  // Flux.1-schnell and HunyuanVideo share 256 x 4096 + pooled 768: the latents decide.
  EXPECT_EQ(families(verdict({1, 256, 4096}, {1, 768}, {1, 16, 64}).candidates),
            std::set<F>{F::kFlux1Schnell});
  EXPECT_EQ(families(verdict({1, 256, 4096}, {1, 768}, {1, 16, 2, 4, 4}).candidates),
            std::set<F>{F::kHunyuanVideo});
  // Wan 2.2 TI2V-5B: Wan's umT5 context, 48 channels.
  EXPECT_EQ(families(verdict({1, 512, 4096}, {}, {1, 48, 3, 2, 2}).candidates),
            std::set<F>{F::kWan22TI2V});
  // Qwen-Image and HunyuanVideo 1.5 share Qwen2.5-VL's 3584: packed 64 vs 5-D 32 channels.
  EXPECT_EQ(families(verdict({1, 1000, 3584}, {}, {1, 16, 64}).candidates),
            std::set<F>{F::kQwenImage});
  EXPECT_EQ(families(verdict({1, 1000, 3584}, {}, {1, 32, 2, 2, 2}).candidates),
            std::set<F>{F::kHunyuanVideo15});
  // Flux.2 and LTX share 128-wide tokens: the context decides.
  EXPECT_EQ(families(verdict({1, 512, 15360}, {}, {1, 64, 128}).candidates),
            std::set<F>{F::kFlux2});
  EXPECT_EQ(families(verdict({2, 128, 4096}, {}, {1, 64, 128}, {}, Shape{}).candidates),
            std::set<F>{F::kLtxVideo});
  // LTX-Video and LTX-2 share the VAE and its tokens: T5-XXL 4096 x 128 or Gemma 3 3840 decide.
  EXPECT_EQ(families(verdict({2, 128, 4096}, {}, {1, 8, 128}, {64, 64, 9}, Shape{}).candidates),
            std::set<F>{F::kLtxVideo});
  // LTX-2.3's video context is LTX-Video's width: the audio context decides (none: LTX-Video;
  // 2048 wide: LTX-2.3); not known: either.
  EXPECT_EQ(families(verdict({2, 128, 4096}, {}, {1, 8, 128}, {64, 64, 9}).candidates),
            (std::set<F>{F::kLtxVideo, F::kLtx23}));
  EXPECT_EQ(families(verdict({2, 128, 4096}, {}, {1, 8, 128}, {64, 64, 9}, Shape{2, 128, 2048})
                         .candidates),
            std::set<F>{F::kLtx23});
  EXPECT_EQ(families(verdict({2, 1024, 4096}, {}, {1, 128, 2, 2, 2}).candidates),
            std::set<F>{F::kLtx23});  // 1024 tokens: not LTX-Video's 128
  EXPECT_EQ(families(verdict({2, 1024, 3840}, {}, {1, 8, 128}, {}, Shape{2, 1024, 3840})
                         .candidates),
            std::set<F>{F::kLtx2});
  // An audio context of the wrong width, or none for Gemma's 3840: a conflict.
  EXPECT_TRUE(verdict({2, 128, 4096}, {}, {1, 8, 128}, {}, Shape{2, 128, 3840}).candidates.empty());
  const FamilyVerdict no_audio = verdict({2, 128, 3840}, {}, {1, 8, 128}, {}, Shape{});
  EXPECT_TRUE(no_audio.candidates.empty());
  EXPECT_NE(std::find(no_audio.notes.begin(), no_audio.notes.end(),
                      "no audio context: the families without an audio stream (not LTX-2, "
                      "LTX-2.3)"),
            no_audio.notes.end());
  // No audio context: Wan and Flux stay themselves.
  EXPECT_EQ(families(verdict({1, 512, 4096}, {}, {1, 16, 3, 4, 4}, {}, Shape{}).candidates),
            std::set<F>{F::kWan21});
  EXPECT_EQ(families(verdict({2, 1024, 3840}, {}, {1, 8, 128}, {64, 64, 9}).candidates),
            std::set<F>{F::kLtx2});
  EXPECT_EQ(families(verdict({2, 1024, 3840}, {}, {1, 128, 2, 2, 2}).candidates),
            std::set<F>{F::kLtx2});
  EXPECT_EQ(families(verdict({}, {}, {1, 8, 128}, {64, 64, 9}).candidates),
            (std::set<F>{F::kLtxVideo, F::kLtx2, F::kLtx23}));  // latents alone: either
  // Gemma's 3840 with another family's latents: a conflict, no family.
  EXPECT_TRUE(verdict({1, 1024, 3840}, {}, {1, 16, 64}).candidates.empty());
  EXPECT_TRUE(verdict({1, 512, 4096}, {1, 768}, {1, 16, 64}).unique());
}

TEST(ClassifyPipeline, ConflictsAndNothingSeen) {
  const FamilyVerdict v = verdict({1, 77, 768}, {}, {1, 16, 64});  // SD1 text, Flux latents
  EXPECT_TRUE(v.candidates.empty());
  EXPECT_TRUE(std::any_of(v.notes.begin(), v.notes.end(),
                          [](const std::string& n) { return n.rfind("conflict", 0) == 0; }));
  const FamilyVerdict none = verdict({}, {}, {});
  EXPECT_TRUE(none.candidates.empty());
  EXPECT_EQ(none.notes, std::vector<std::string>{"no tensor seen"});
}

TEST(ResolveFamily, AliasesDecidedByTheTensors) {
  using F = ModelFamily;
  EXPECT_EQ(resolve_family("wan2.2", {{1, 512, 4096}, {}, {1, 48, 3, 2, 2}, {}}), F::kWan22TI2V);
  EXPECT_EQ(resolve_family("wan2.2", {{1, 512, 4096}, {}, {1, 16, 3, 4, 4}, {}}), F::kWan21);
  EXPECT_EQ(resolve_family("wan2.2", {}), F::kWan21);  // nothing seen: the first
  EXPECT_EQ(resolve_family("flux2-klein", {{1, 512, 12288}, {}, {1, 64, 128}, {}}),
            F::kFlux2Klein9B);
  EXPECT_EQ(resolve_family("flux2-klein", {{1, 512, 7680}, {}, {1, 64, 128}, {}}),
            F::kFlux2Klein4B);
  EXPECT_EQ(resolve_family("sdxl", {{1, 512, 4096}, {}, {1, 48, 3, 2, 2}, {}}), F::kSDXL);
  EXPECT_FALSE(resolve_family("dalle", {}).has_value());
  // "ltx2": the context's width decides LTX-2.0 (3840) or LTX-2.3 (4096).
  EXPECT_EQ(resolve_family("ltx2", {{2, 128, 3840}, {}, {1, 8, 128}, {}, Shape{2, 128, 3840}}),
            F::kLtx2);
  EXPECT_EQ(resolve_family("ltx2", {{2, 128, 4096}, {}, {1, 8, 128}, {}, Shape{2, 128, 2048}}),
            F::kLtx23);
  EXPECT_EQ(resolve_family("LTX-2", {{2, 128, 4096}, {}, {1, 8, 128}, {}}), F::kLtx23);
  EXPECT_EQ(resolve_family("ltx2", {{}, {}, {1, 128, 1, 2, 2}, {}}), F::kLtx2);  // latents: both
  EXPECT_EQ(resolve_family("ltx", {{2, 128, 4096}, {}, {1, 8, 128}, {}, Shape{2, 128, 2048}}),
            F::kLtxVideo);  // one family named: as named
}

}  // namespace
}  // namespace genscope

// Merges of every LoRA module type against the results of ComfyUI's own calculate_weight
// (recorded in tests/fixtures/comfy_answers/calculate_weight.safetensors, written into the cases
// by tests/data/make_merge_cases.py): merge_lora end to end, the ModelPatcher
// with hand-built targets (bias_key, transpose, chunks, strength_model), the refusals, and the
// BLAS product against a double-precision loop.
#include <gtest/gtest.h>

#include <omp.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "genscope/error.hpp"
#include "genscope/lora.hpp"
#include "genscope/model_patcher.hpp"
#include "genscope/model_snapshot.hpp"
#include "lora/matmul.hpp"
#include "lora/merge_kernel.hpp"
#include "model/float_convert.hpp"
#include "numpy_reference.hpp"

namespace genscope {
namespace {

namespace fs = std::filesystem;

// The generated cases, once per test binary.
const fs::path& cases_dir() {
  static const fs::path dir = [] {
    const fs::path d = test::scratch_dir("merge_cases_" + std::to_string(::getpid()));
    const std::string cmd = std::string(GENSCOPE_PYTHON) + " " + GENSCOPE_SOURCE_DIR +
                            "/tests/data/make_merge_cases.py " + d.string();
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("make_merge_cases.py failed: " + cmd);
    return d;
  }();
  static const struct Cleanup {
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup;
  return dir;
}
const nlohmann::json& cases() {
  static const nlohmann::json j = test::read_json(cases_dir() / "cases.json");
  return j;
}

// One unit in the last place of `dtype` at |x| (the rounding step of a correctly rounded
// result), so "within one ulp" means genscope's float32 math plus its final rounding stays
// as close to the exact value as the stored dtype can show.
double ulp(DType dtype, double x) {
  const int mantissa = dtype == DType::kF16 ? 10 : dtype == DType::kBF16 ? 7 : 23;
  const int min_exp = dtype == DType::kF16 ? -14 : -126;
  const int e = x == 0 ? min_exp : std::max(min_exp, static_cast<int>(std::floor(std::log2(std::fabs(x)))));
  return std::ldexp(1.0, e - mantissa);
}

// Every tensor of `got` (stored dtype) against the unrounded float64 reference: within one
// ulp of the stored dtype (F32: 1e-5 relative), untouched tensors bit for bit.
// `added`: tensors the merge writes that the base lacks (identity-initialised weights), with
// the dtype each must have; their reference starts from the identity.
void expect_merged(const fs::path& got_path, const fs::path& base_path, const fs::path& want_path,
                   const std::map<std::string, std::string>& added = {}) {
  const auto got = SafetensorsFile::open(got_path);
  const auto base = SafetensorsFile::open(base_path);
  const auto want = SafetensorsFile::open(want_path);
  ASSERT_EQ(got.entries().size(), base.entries().size() + added.size());
  for (const auto& [name, dtype] : added) {
    const SafetensorsEntry* g = got.find(name);
    const SafetensorsEntry* w = want.find(name);
    ASSERT_NE(g, nullptr) << name << " not written";
    ASSERT_NE(w, nullptr) << name;
    EXPECT_EQ(dtype_name(g->dtype), dtype) << name;
    ASSERT_EQ(g->shape, w->shape) << name;
    const auto gv = detail::tensor_to_f32(got, *g);
    std::vector<double> exact(gv.size());
    const auto bytes = want.bytes(*w);
    std::memcpy(exact.data(), bytes.data(), bytes.size());
    std::size_t off_identity = 0;
    for (std::size_t i = 0; i < gv.size(); ++i) {
      const std::size_t n = static_cast<std::size_t>(g->shape[0]);
      off_identity += exact[i] != (i / n == i % n ? 1.0 : 0.0);
      EXPECT_LE(std::fabs(gv[i] - exact[i]), ulp(g->dtype, exact[i])) << name << "[" << i << "]";
    }
    EXPECT_GT(off_identity, 0u) << name << ": the reference does not patch it";
  }
  for (const SafetensorsEntry& b : base.entries()) {
    const SafetensorsEntry* g = got.find(b.name);
    const SafetensorsEntry* w = want.find(b.name);
    ASSERT_NE(g, nullptr) << b.name;
    ASSERT_NE(w, nullptr) << b.name;
    ASSERT_EQ(g->dtype, b.dtype) << b.name;
    ASSERT_EQ(g->shape, b.shape) << b.name;
    const auto gv = detail::tensor_to_f32(got, *g);
    const auto bv = detail::tensor_to_f32(base, b);
    const auto wv = detail::tensor_to_f32(want, *w);  // F64 read as float32 only for the "changed" test
    std::vector<double> exact(wv.size());
    {
      const auto bytes = want.bytes(*w);
      std::memcpy(exact.data(), bytes.data(), bytes.size());
    }
    bool reference_changes = false;
    for (std::size_t i = 0; i < bv.size(); ++i) reference_changes = reference_changes || exact[i] != bv[i];
    if (!reference_changes) {
      const auto gb = got.bytes(*g), bb = base.bytes(b);
      EXPECT_TRUE(std::equal(gb.begin(), gb.end(), bb.begin())) << b.name << " changed; NumPy leaves it";
      continue;
    }
    std::size_t bad = 0;
    for (std::size_t i = 0; i < gv.size(); ++i) {
      const double tol = b.dtype == DType::kF32 ? 1e-5 * std::fabs(exact[i]) + 1e-7 : ulp(b.dtype, exact[i]);
      if (std::fabs(gv[i] - exact[i]) > tol && bad++ < 3) {
        ADD_FAILURE() << b.name << "[" << i << "] = " << gv[i] << ", NumPy " << exact[i] << " (base " << bv[i]
                      << ", tolerance " << tol << ")";
      }
    }
    EXPECT_EQ(bad, 0u) << b.name;
  }
}

TEST(LoraMerge, EveryModuleTypeMatchesNumPyComfyUi) {
  ASSERT_GE(cases()["merges"].size(), 6u);
  for (const auto& c : cases()["merges"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const fs::path out = cases_dir() / (c["name"].get<std::string>() + "_out.safetensors");
    const fs::path base = cases_dir() / c["base"].get<std::string>();
    const LoraMergeResult r = merge_lora(base, cases_dir() / c["lora"].get<std::string>(), out,
                                         c["strength"].get<double>());
    EXPECT_GT(r.weights_patched, 0u);
    EXPECT_TRUE(r.fit.shape_mismatches.empty());
    expect_merged(out, base, cases_dir() / c["expected"].get<std::string>());
    fs::remove(out);
  }
}

// merge_lora through fit_lora onto bases with complete key sets, where the targets use every
// LoraKeyTarget field (transpose, materialize_identity, chunks, row windows, delta slices,
// bias_key, a bias-only target, a shadowed module); the targets are ComfyUI's, written in the
// generator, not read from genscope.
TEST(LoraMerge, TargetsFromTheFitMatchNumPyComfyUi) {
  ASSERT_EQ(cases()["targets"].size(), 3u);
  for (const auto& c : cases()["targets"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const fs::path out = cases_dir() / (c["name"].get<std::string>() + "_out.safetensors");
    const fs::path base = cases_dir() / c["base"].get<std::string>();
    const LoraMergeResult r =
        merge_lora(base, cases_dir() / c["lora"].get<std::string>(), out, c["strength"].get<double>());
    EXPECT_TRUE(r.fit.shape_mismatches.empty());
    EXPECT_TRUE(r.fit.merge_unsupported.empty());
    // The shadowed module is reported and applied nowhere.
    ASSERT_EQ(r.fit.shadowed.size(), c["shadowed"].size());
    for (std::size_t i = 0; i < r.fit.shadowed.size(); ++i) {
      EXPECT_EQ(r.fit.shadowed[i].module, c["shadowed"][i][0].get<std::string>());
      EXPECT_EQ(r.fit.shadowed[i].by, c["shadowed"][i][1].get<std::string>());
      for (const auto& [module, target] : r.fit.matched) EXPECT_NE(module, r.fit.shadowed[i].module);
    }
    expect_merged(out, base, cases_dir() / c["expected"].get<std::string>(),
                  c["new"].get<std::map<std::string, std::string>>());
    fs::remove(out);
  }
}

// The fit's targets carry the fields the merge honours (the values ComfyUI's maps give).
TEST(LoraMerge, FitTargetsCarryTransposeIdentityWindowsAndSlices) {
  const auto find = [](const LoraFit& fit, const std::string& module) {
    std::vector<LoraKeyTarget> out;
    for (const auto& [m, t] : fit.matched) {
      if (m == module) out.push_back(t);
    }
    return out;
  };
  const auto xl = fit_lora(*LoraFile::open(cases_dir() / "t_sdxl_targets.safetensors"),
                           SafetensorsFile::open(cases_dir() / "t_sdxl.safetensors"));
  const auto te2 = find(xl, "lora_te2_text_projection");
  ASSERT_EQ(te2.size(), 1u);
  EXPECT_TRUE(te2[0].transpose);
  const auto te1 = find(xl, "lora_te1_text_projection");
  ASSERT_EQ(te1.size(), 1u);
  EXPECT_TRUE(te1[0].materialize_identity);
  EXPECT_EQ(te1[0].shape, (std::vector<std::int64_t>{12, 12}));
  const auto fc1 = find(xl, "lora_te1_text_model_encoder_layers_0_mlp_fc1");
  ASSERT_EQ(fc1.size(), 1u);
  EXPECT_EQ(fc1[0].bias_key, "conditioner.embedders.0.transformer.text_model.encoder.layers.0.mlp.fc1.bias");
  const auto slices = find(fit_lora(*LoraFile::open(cases_dir() / "t_flux_slices.safetensors"),
                                    SafetensorsFile::open(cases_dir() / "t_flux_diffusers.safetensors")),
                           "lora_unet_single_blocks_0_linear1");
  ASSERT_EQ(slices.size(), 4u);  // to_q, to_k, to_v, proj_mlp
  std::int64_t next = 0;
  for (const LoraKeyTarget& t : slices) {
    EXPECT_EQ(t.delta_row_offset, next) << t.key;
    next += t.rows;
  }
  EXPECT_EQ(next, 7 * 16);
}

// A model ComfyUI has no detection rule for, stored under its "diffusion_model." prefix (a
// custom node's model, genscope's reference pipeline): ComfyUI's generic names still map
// (model_lora_keys_unet's first loop); diffusers' loader has no model to load them into.
TEST(LoraMerge, UnknownModelUnderDiffusionModelGetsComfyUisGenericNames) {
  const fs::path base = cases_dir() / "custom_base.safetensors";
  const fs::path lora_path = cases_dir() / "custom_lora.safetensors";
  const auto fill = [](float v) {
    return [v](std::span<std::byte> out) {
      std::vector<float> x(out.size() / 4, v);
      std::memcpy(out.data(), x.data(), out.size());
    };
  };
  write_safetensors(base, {{"diffusion_model.down.0.attn.q.weight", DType::kF32, {4, 3}, fill(0.5f)},
                           {"diffusion_model.down.0.attn.q.bias", DType::kF32, {4}, fill(0.0f)}});
  write_safetensors(lora_path, {{"lora_unet_down_0_attn_q.lora_up.weight", DType::kF32, {4, 1}, fill(1.0f)},
                                {"lora_unet_down_0_attn_q.lora_down.weight", DType::kF32, {1, 3}, fill(2.0f)}});
  const auto lora = LoraFile::open(lora_path);
  const LoraFit comfy = fit_lora(*lora, SafetensorsFile::open(base));
  ASSERT_EQ(comfy.matched.size(), 1u) << comfy.verdict;
  EXPECT_EQ(comfy.matched[0].second.key, "diffusion_model.down.0.attn.q.weight");
  EXPECT_TRUE(fit_lora(*lora, SafetensorsFile::open(base), LoraLoader::kDiffusers).matched.empty());
  const fs::path out = cases_dir() / "custom_out.safetensors";
  merge_lora(base, lora_path, out, 0.25);
  const auto merged = SafetensorsFile::open(out);
  for (float x : detail::tensor_to_f32(merged, *merged.find("diffusion_model.down.0.attn.q.weight"))) {
    EXPECT_EQ(x, 0.5f + 0.25f * 2.0f);  // W + s·up·down, exact in float
  }
  fs::remove(out);
}

TEST(LoraMerge, TuckerLohaHasTheConvShapeAndNorm) {
  const auto lora = LoraFile::open(cases_dir() / "m_loha.safetensors");
  const LoraModule* m = lora->module("lora_unet_input_blocks_1_0_out_layers_3");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->type, LoraModuleType::kLoha);
  EXPECT_EQ(m->delta_shape, (std::vector<std::int64_t>{8, 8, 3, 3}));  // not [rank, in]
  EXPECT_EQ(m->rank, 3);
  EXPECT_DOUBLE_EQ(m->scale, 0.5);
  ASSERT_TRUE(std::isfinite(m->delta_norm));
  const auto d = lora->delta(*m);
  double s = 0;
  for (float x : d) s += static_cast<double>(x) * x;
  EXPECT_NEAR(m->delta_norm, std::sqrt(s), 1e-6 * std::sqrt(s));
  const auto base = SafetensorsFile::open(cases_dir() / "merge_base.safetensors");
  EXPECT_TRUE(fit_lora(*lora, base).shape_mismatches.empty());
}

TEST(ModelPatcher, BiasTransposeChunksAndStrengthModelMatchNumPy) {
  for (const auto& c : cases()["patchers"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const fs::path base_path = cases_dir() / c["base"].get<std::string>();
    const auto base = SafetensorsFile::open(base_path);
    const auto lora = LoraFile::open(cases_dir() / c["lora"].get<std::string>());
    ModelPatcher patcher(snapshot_from_safetensors(base_path));
    for (const auto& call : c["calls"]) {
      LoraFit fit;
      for (const auto& t : call["targets"]) {
        LoraKeyTarget target;
        target.key = t["key"];
        target.chunk = t["chunk"];
        target.chunks = t["chunks"];
        target.bias_key = t["bias_key"];
        target.transpose = t["transpose"];
        fit.matched.emplace_back(t["module"], target);
      }
      patcher.add_patches(lora, fit, call["strength"], call["strength_model"]);
    }
    // b_norm without w_norm patches nothing (ComfyUI loads b_norm only beside a w_norm).
    for (const auto& [key, entries] : patcher.patches()) {
      for (const PatchEntry& e : entries) EXPECT_NE(e.patch.module, "m_bnorm_only") << key;
    }
    EXPECT_EQ(patcher.patches().at("lin.bias").size(), 3u);  // m_diff, m_bias_only twice
    EXPECT_EQ(patcher.patches().at("lin.weight").size(), 1u);  // m_bias_only has no weight patch
    patcher.validate();
    const auto want = SafetensorsFile::open(cases_dir() / c["expected"].get<std::string>());
    for (const SafetensorsEntry& e : base.entries()) {
      std::vector<float> w = detail::tensor_to_f32(base, e);
      const std::vector<float> before = w;
      patcher.patch_weight(e.name, w);
      std::vector<double> exact(w.size());
      const auto bytes = want.bytes(*want.find(e.name));
      std::memcpy(exact.data(), bytes.data(), bytes.size());
      bool changed = false;
      for (std::size_t i = 0; i < w.size(); ++i) {
        changed = changed || w[i] != before[i];
        EXPECT_NEAR(w[i], exact[i], 2e-6 * (1 + std::fabs(exact[i]))) << e.name << "[" << i << "]";
      }
      EXPECT_TRUE(changed) << e.name;  // every tensor of this base gets a patch
    }
  }
}

TEST(ModelPatcher, RefusesTransposedChunksAndBadShapes) {
  const fs::path base_path = cases_dir() / "patch_base.safetensors";
  const auto lora = LoraFile::open(cases_dir() / "p_lora.safetensors");
  ModelPatcher patcher(snapshot_from_safetensors(base_path));
  LoraFit fit;
  fit.matched.emplace_back("m_q", LoraKeyTarget{.key = "qkv.weight", .chunks = 3, .transpose = true});
  patcher.add_patches(lora, fit, 1.0);
  try {
    patcher.validate();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "LoraUnsupported") << e.what();
  }
  ModelPatcher wrong(snapshot_from_safetensors(base_path));
  LoraFit fit2;
  fit2.matched.emplace_back("m_proj", LoraKeyTarget{.key = "lin.weight"});  // [16,12] vs 16×12: fits
  fit2.matched.emplace_back("m_q", LoraKeyTarget{.key = "lin.weight"});     // 16×8 into 16×12
  wrong.add_patches(lora, fit2, 1.0);
  try {
    wrong.validate();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "LoraShapeMismatch") << e.what();
    EXPECT_NE(std::string(e.what()).find("m_q"), std::string::npos) << e.what();
  }
  std::vector<float> w(16 * 12, 0.0f);
  EXPECT_THROW(wrong.patch_weight("lin.weight", w), Error);
  std::vector<float> short_w(5, 0.0f);
  EXPECT_THROW(wrong.patch_weight("lin.weight", short_w), Error);
}

TEST(LoraMerge, MalformedModulesAreRefusedByNameAndWriteNothing) {
  ASSERT_GE(cases()["errors"].size(), 6u);
  for (const auto& c : cases()["errors"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const fs::path out = cases_dir() / "refused.safetensors";
    try {
      merge_lora(cases_dir() / c["base"].get<std::string>(), cases_dir() / c["lora"].get<std::string>(), out, 1.0);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.name(), c["error"].get<std::string>()) << e.what();
      EXPECT_NE(std::string(e.what()).find(c["names"].get<std::string>()), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(out));
    for (const auto& f : fs::directory_iterator(cases_dir())) {
      EXPECT_EQ(f.path().filename().string().find("refused"), std::string::npos) << f.path();
    }
  }
}

// The BLAS products against a double-precision loop, including shapes that are not multiples
// of any kernel's block and the transposed-a form the Tucker rebuilds use.
TEST(LoraMatmul, BlasProductsMatchADoubleLoop) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  for (const auto [m, k, n] : {std::array<std::int64_t, 3>{1, 1, 1}, {7, 3, 5}, {33, 16, 130}, {129, 64, 17}}) {
    std::vector<float> a(m * k), b(k * n), out(m * n), at(k * m);
    for (float& x : a) x = nd(rng);
    for (float& x : b) x = nd(rng);
    for (float& x : out) x = nd(rng);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < k; ++j) at[j * m + i] = a[i * k + j];
    std::vector<float> o1 = out, o2 = out;
    detail::matmul_add(a.data(), b.data(), o1.data(), m, k, n, 0.75f);
    detail::matmul_add_at(at.data(), b.data(), o2.data(), m, k, n, 0.75f);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t p = 0; p < k; ++p) s += static_cast<double>(a[i * k + p]) * b[p * n + j];
        const double want = out[i * n + j] + 0.75 * s;
        EXPECT_NEAR(o1[i * n + j], want, 1e-5 * (1 + std::fabs(want)));
        EXPECT_NEAR(o2[i * n + j], want, 1e-5 * (1 + std::fabs(want)));
      }
    }
  }
}

// The fused kernel, its row blocks handed to three threads, two patches on one F16 weight:
// every output within one F16 ulp of the double-precision result.
TEST(LoraMergeKernel, ThreadedRowSplitMatchesPlainProduct) {
  const std::int64_t rows = 1000, cols = 700, rank = 12;
  ASSERT_GT(detail::merge_threads(rows, cols), 0);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  std::vector<detail::PreparedLora> patches(2);
  for (auto& p : patches) {
    p.rank = rank;
    p.coefficient = 0.6f;
    p.up.resize(rows * rank);
    p.down.resize(rank * cols);
    for (float& x : p.up) x = nd(rng);
    for (float& x : p.down) x = nd(rng);
  }
  std::vector<std::uint16_t> src(rows * cols), dst(rows * cols);
  for (auto& x : src) x = detail::f32_to_f16(nd(rng));
  detail::merge_rows(reinterpret_cast<const std::byte*>(src.data()), reinterpret_cast<std::byte*>(dst.data()),
                     DType::kF16, 0, rows, cols, patches, 3);  // more threads than cores is allowed
  std::size_t off_by_more_than_one_ulp = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      double w = detail::f16_to_f32(src[i * cols + j]);
      for (const auto& p : patches) {
        double s = 0;
        for (std::int64_t r = 0; r < rank; ++r) s += static_cast<double>(p.up[i * rank + r]) * p.down[r * cols + j];
        w += 0.6 * s;
      }
      const double got = detail::f16_to_f32(dst[i * cols + j]);
      if (std::fabs(got - w) > ulp(DType::kF16, w)) ++off_by_more_than_one_ulp;
    }
  }
  EXPECT_EQ(off_by_more_than_one_ulp, 0u);
}

// The guard that keeps OpenBLAS on its caller's thread: the OpenMP build follows the calling
// thread's OpenMP count (set to 1, restored), the pthreads build its global count; nested
// guards restore what the outer one set.
TEST(LoraMergeKernel, BlasThreadGuardRestoresThreadCounts) {
  const int blas_before = detail::blas_threads(), omp_before = omp_get_max_threads();
  const std::string build = detail::blas_threading();
  const auto single = [&] {
    if (build == "openmp") return omp_get_max_threads() == 1;
    if (build == "pthreads") return detail::blas_threads() == 1;
    return true;
  };
  {
    const detail::SingleThreadedBlas outer;
    EXPECT_TRUE(single()) << build;
    {
      const detail::SingleThreadedBlas inner;
      EXPECT_TRUE(single()) << build;
    }
    EXPECT_TRUE(single()) << build;
    // A BLAS call under the guard leaves it in force (OpenBLAS's OpenMP build re-reads the
    // caller's count on every call).
    std::vector<float> a(256 * 256, 0.5f), b(256 * 256, 0.5f), c(256 * 256, 0.0f);
    detail::matmul_add(a.data(), b.data(), c.data(), 256, 256, 256, 1.0f);
    EXPECT_FLOAT_EQ(c[777], 64.0f);
    EXPECT_TRUE(single()) << build;
  }
  EXPECT_EQ(detail::blas_threads(), blas_before);
  EXPECT_EQ(omp_get_max_threads(), omp_before);
  // And around a whole threaded merge.
  const std::int64_t rows = 1024, cols = 1024;
  std::vector<detail::PreparedLora> patches(1);
  patches[0].rank = 4;
  patches[0].up.assign(rows * 4, 0.01f);
  patches[0].down.assign(4 * cols, 0.01f);
  std::vector<std::uint16_t> src(rows * cols, 0), dst(rows * cols, 1);
  detail::merge_rows(reinterpret_cast<const std::byte*>(src.data()), reinterpret_cast<std::byte*>(dst.data()),
                     DType::kF16, 0, rows, cols, patches, 2);
  EXPECT_FLOAT_EQ(detail::f16_to_f32(dst[12345]), detail::f16_to_f32(detail::f32_to_f16(4 * 0.01f * 0.01f)));
  EXPECT_EQ(detail::blas_threads(), blas_before);
  EXPECT_EQ(omp_get_max_threads(), omp_before);
}

}  // namespace
}  // namespace genscope

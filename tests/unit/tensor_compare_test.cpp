// compare_tensors against a NumPy float64 reference (/usr/bin/python3).
//
// Tolerances: counts, max_abs_error, the worst index and mismatch counts exactly; mean abs
// error, RMSE, cosine similarity and PSNR within 1e-9 relative; max_rel_error within 1e-6
// relative (the f32-lane kernels divide in f32, see docs/tensor-analysis.md).
#include "genscope/tensor_compare.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "genscope/error.hpp"
#include "unit/numpy_reference.hpp"

namespace genscope {
namespace {

const char* kScript = R"PY(
import json, sys, os
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(99)
cases = []
RTOL, ATOL = 1e-5, 1e-8
np.seterr(all="ignore")

def j(v):
    v = float(v)
    return v if np.isfinite(v) else str(v)

def bf16(a):
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)

def unbf16(b):
    return (b.astype(np.uint32) << 16).view(np.float32)

def add(name, da, ra, va, db, rb, vb, shape):
    ra.tofile(os.path.join(out, name + "_a.bin")); rb.tofile(os.path.join(out, name + "_b.bin"))
    a = np.asarray(va, np.float64).reshape(shape); b = np.asarray(vb, np.float64).reshape(shape)
    both = np.isfinite(a) & np.isfinite(b)
    r = dict(name=name, da=da, db=db, shape=list(shape),
             mismatch=int((~np.isclose(a, b, rtol=RTOL, atol=ATOL)).sum()),
             nan_mismatch=int((np.isnan(a) != np.isnan(b)).sum()), compared=int(both.sum()))
    if both.any():
        x = a[both]; y = b[both]; d = np.abs(x - y)
        rel = np.where(d == 0, 0.0, d / np.abs(y))
        mse = float((d * d).mean()); peak = float(np.abs(x).max())
        dd = np.where(both, np.abs(a - b), -1.0)
        worst = int(np.argmax(dd))
        r.update(max_abs=float(d.max()), mean_abs=float(d.mean()), rmse=float(np.sqrt(mse)),
                 max_rel=j(rel.max()),
                 cos=j((x * y).sum() / (np.sqrt((x * x).sum()) * np.sqrt((y * y).sum()))),
                 psnr=(j(10 * np.log10(peak * peak / mse)) if mse > 0 else "inf"),
                 worst=worst, worst_index=[int(i) for i in np.unravel_index(worst, shape)])
    cases.append(r)

for n in [1, 5, 33, 4097, 20011]:
    a = rng.normal(0, 1, n).astype(np.float32)
    b = (a + rng.normal(0, 1e-5, n)).astype(np.float32)
    add("f32_%d" % n, "F32", a, a, "F32", b, b, (n,))
a = rng.normal(0, 2, (3, 50, 70)).astype(np.float32)
b = a.copy(); b[1, 20, 33] += 0.5; b[2, 3, 4] = 0.0
add("f32_shaped", "F32", a, a, "F32", b, b, a.shape)
a = rng.normal(0, 1, 9001).astype(np.float32); b = a.copy()
a[[10, 500, 7000]] = np.nan; b[[500, 8000]] = np.nan
a[100] = np.inf; b[100] = np.inf; a[200] = np.inf; b[200] = -np.inf; b[300] = np.inf
add("f32_special", "F32", a, a, "F32", b, b, (9001,))
a = rng.normal(0, 1, 7000).astype(np.float16); b = (a + rng.normal(0, 1e-2, 7000)).astype(np.float16)
add("f16", "F16", a, a, "F16", b, b, (70, 100))
fa = rng.normal(0, 1, 5555).astype(np.float32); ba = bf16(fa); bb = bf16(fa * 1.01)
add("bf16", "BF16", ba, unbf16(ba), "BF16", bb, unbf16(bb), (5555,))
a = rng.normal(5, 1, 3333); b = a * (1 + 1e-6)
add("f64", "F64", a, a, "F64", b, b, (3333,))
a = rng.normal(0, 1, 4100).astype(np.float32); b = a.astype(np.float16)
add("mixed_f32_f16", "F32", a, a, "F16", b, b, (4100,))
a = rng.integers(-50, 50, 2049).astype(np.int32); b = (a + rng.integers(0, 2, 2049)).astype(np.float32)
add("mixed_i32_f32", "I32", a, a, "F32", b, b, (2049,))
a = np.zeros(1000, np.float32)
add("zeros", "F32", a, a, "F32", a, a, (1000,))
json.dump(cases, open(os.path.join(out, "cases.json"), "w"))
)PY";

double num(const nlohmann::json& j) {
  return j.is_string() ? std::stod(j.get<std::string>()) : j.get<double>();
}

void expect_rel(double ours, const nlohmann::json& ref_json, double rel,
                const std::string& what) {
  const double ref = num(ref_json);
  if (std::isnan(ref)) {
    EXPECT_TRUE(std::isnan(ours)) << what;
  } else if (std::isinf(ref)) {
    EXPECT_EQ(ours, ref) << what;
  } else {
    EXPECT_NEAR(ours, ref, rel * std::max(std::fabs(ref), 1e-300)) << what;
  }
}

TEST(TensorCompare, MatchesNumpyForEveryCase) {
  const auto dir = test::scratch_dir("tensor_compare");
  test::run_numpy(dir, kScript);
  const nlohmann::json cases = test::read_json(dir / "cases.json");
  ASSERT_GE(cases.size(), 13u);
  for (const auto& r : cases) {
    const std::string name = r["name"];
    const auto ra = test::read_bytes(dir / (name + "_a.bin"));
    const auto rb = test::read_bytes(dir / (name + "_b.bin"));
    const auto shape = r["shape"].get<std::vector<std::int64_t>>();
    TensorView a{.data = ra.data(), .shape = shape, .dtype = *parse_dtype(r["da"].get<std::string>())};
    TensorView b{.data = rb.data(), .shape = shape, .dtype = *parse_dtype(r["db"].get<std::string>())};
    ASSERT_EQ(static_cast<std::int64_t>(ra.size()), a.nbytes()) << name;
    const TensorComparison c = compare_tensors(a, b);
    EXPECT_TRUE(c.shape_match) << name;
    EXPECT_EQ(c.dtype_match, a.dtype == b.dtype) << name;
    EXPECT_EQ(c.mismatch_count, r["mismatch"].get<std::int64_t>()) << name;
    EXPECT_EQ(c.allclose, r["mismatch"].get<std::int64_t>() == 0) << name;
    EXPECT_EQ(c.nan_mismatch_count, r["nan_mismatch"].get<std::int64_t>()) << name;
    EXPECT_EQ(c.compared_count, r["compared"].get<std::int64_t>()) << name;
    EXPECT_EQ(c.max_abs_error, r["max_abs"].get<double>()) << name;
    EXPECT_EQ(c.worst_flat_index, r["worst"].get<std::int64_t>()) << name;
    EXPECT_EQ(c.worst_index, r["worst_index"].get<std::vector<std::int64_t>>()) << name;
    expect_rel(c.mean_abs_error, r["mean_abs"], 1e-9, name + " mean_abs");
    expect_rel(c.rmse, r["rmse"], 1e-9, name + " rmse");
    expect_rel(c.cosine_similarity, r["cos"], 1e-9, name + " cos");
    expect_rel(c.psnr_db, r["psnr"], 1e-9, name + " psnr");
    expect_rel(c.max_rel_error, r["max_rel"], 1e-6, name + " max_rel");
  }
}

TEST(TensorCompare, ShapeMismatchIsAResult) {
  std::vector<float> x(6, 1.0f);
  TensorView a{.data = x.data(), .shape = {2, 3}};
  TensorView b{.data = x.data(), .shape = {3, 2}};
  const TensorComparison c = compare_tensors(a, b);
  EXPECT_FALSE(c.shape_match);
  EXPECT_FALSE(c.allclose);
  EXPECT_TRUE(std::isnan(c.max_abs_error));
}

TEST(TensorCompare, StridedMatchesContiguousAndThreadsAgree) {
  // b is a transposed view of bt; compare(a, view) must equal compare(a, contiguous copy).
  const std::int64_t r = 512, k = 3000;  // 6 MiB per f32 operand
  std::vector<float> a(r * k), bt(k * r), b(r * k);
  for (std::int64_t i = 0; i < r; ++i) {
    for (std::int64_t j = 0; j < k; ++j) {
      a[i * k + j] = static_cast<float>(std::sin(0.37 * static_cast<double>(i * k + j)));
      b[i * k + j] = a[i * k + j] + ((i * k + j) % 977 == 0 ? 1e-3f : 0.0f);
      bt[j * r + i] = b[i * k + j];
    }
  }
  b[1234567] += 0.25f;
  bt[(1234567 % k) * r + 1234567 / k] += 0.25f;
  TensorView va{.data = a.data(), .shape = {r, k}};
  TensorView vb{.data = b.data(), .shape = {r, k}};
  TensorView vs{.data = bt.data(), .shape = {r, k}, .strides = {1, r}};
  const TensorComparison one = compare_tensors(va, vb, {.threads = 1});
  const TensorComparison two = compare_tensors(va, vb, {.threads = 3});
  const TensorComparison strided = compare_tensors(va, vs);
  for (const TensorComparison* c : {&two, &strided}) {
    EXPECT_EQ(c->worst_flat_index, 1234567);
    EXPECT_EQ(c->worst_index, (std::vector<std::int64_t>{1234567 / k, 1234567 % k}));
    EXPECT_EQ(c->max_abs_error, one.max_abs_error);
    EXPECT_EQ(c->mismatch_count, one.mismatch_count);
    EXPECT_NEAR(c->rmse, one.rmse, 1e-12);
  }
  EXPECT_GT(one.mismatch_count, 1000);
  EXPECT_FALSE(one.allclose);
}

TEST(TensorCompare, InvalidViewIsNamedError) {
  float x = 0;
  TensorView ok{.data = &x, .shape = {1}};
  TensorView bad{.data = nullptr, .shape = {1}};
  try {
    compare_tensors(ok, bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "NullData");
  }
}

}  // namespace
}  // namespace genscope

// compute_stats against a NumPy float64 reference (/usr/bin/python3).
//
// Tolerances: counts, min, max and abs_max must match exactly (they are exact in double);
// mean, std and l2_norm within 1e-9 relative to (|mean| + std) or to the reference value,
// since both sides accumulate in double (NumPy pairwise, genscope blocked + Chan).
#include "genscope/tensor_stats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "genscope/error.hpp"
#include "unit/numpy_reference.hpp"

namespace genscope {
namespace {

const char* kScript = R"PY(
import json, sys, os
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(1234)
cases = []

def bf16_bits(a):
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)

def sign(b):
    return np.where(b & 0x80, -1.0, 1.0)

def e4m3(b):
    b = b.astype(np.int64); e = (b >> 3) & 0xF; m = b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return sign(b) * v

def e5m2(b):
    b = b.astype(np.int64); e = (b >> 2) & 0x1F; m = b & 3
    v = np.where(e == 0, m / 4.0 * 2.0 ** -14, (1 + m / 4.0) * 2.0 ** (e - 15.0))
    v = np.where(e == 31, np.where(m == 0, np.inf, np.nan), v)
    return sign(b) * v

def add(name, dtype, raw, vals):
    vals = np.asarray(vals, np.float64).ravel()
    raw.tofile(os.path.join(out, name + ".bin"))
    fin = vals[np.isfinite(vals)]
    r = dict(name=name, dtype=dtype, numel=int(vals.size), nan=int(np.isnan(vals).sum()),
             pinf=int(np.isposinf(vals).sum()), ninf=int(np.isneginf(vals).sum()),
             zeros=int((vals == 0).sum()), finite=int(fin.size))
    if fin.size:
        r.update(min=float(fin.min()), max=float(fin.max()), mean=float(fin.mean()),
                 std=float(fin.std()), abs_max=float(np.abs(fin).max()),
                 l2=float(np.sqrt((fin * fin).sum())))
    cases.append(r)

def sprinkle(a, k):
    idx = rng.choice(a.size, size=min(k, a.size), replace=False)
    for j, i in enumerate(idx):
        a.flat[i] = [np.nan, np.inf, -np.inf, 0.0][j % 4]
    return a

for n in [0, 1, 3, 17, 4095, 4097, 100003]:
    a = rng.normal(3, 2, n).astype(np.float32)
    add("f32_%d" % n, "F32", a, a)
a = sprinkle(rng.normal(0, 1, 10007).astype(np.float32), 40); add("f32_special", "F32", a, a)
a = np.full(33, np.nan, np.float32); add("f32_all_nan", "F32", a, a)
a = np.zeros(4101, np.float32); add("f32_zeros", "F32", a, a)
a = (1e4 + rng.normal(0, 1e-3, 50001)).astype(np.float32); add("f32_offset", "F32", a, a)
a = sprinkle(rng.normal(-5, 10, 9999), 7); add("f64_special", "F64", a, a)
a = sprinkle(rng.normal(0, 1, 12345).astype(np.float16), 20); add("f16_special", "F16", a, a)
a = rng.normal(0, 300, 4099).astype(np.float16); add("f16_wide", "F16", a, a)
b = bf16_bits(sprinkle(rng.normal(1, 5, 7777).astype(np.float32), 9))
add("bf16_special", "BF16", b, (b.astype(np.uint32) << 16).view(np.float32))
b = rng.integers(0, 256, 3001).astype(np.uint8); add("e4m3", "F8_E4M3", b, e4m3(b))
b = rng.integers(0, 256, 3001).astype(np.uint8); add("e5m2", "F8_E5M2", b, e5m2(b))
for dt, name in [(np.int64, "I64"), (np.int32, "I32"), (np.int16, "I16"), (np.int8, "I8"),
                 (np.uint64, "U64"), (np.uint32, "U32"), (np.uint16, "U16"), (np.uint8, "U8")]:
    info = np.iinfo(dt)
    lo, hi = max(info.min, -100000), min(info.max, 100000)
    a = rng.integers(lo, hi, 5003, dtype=dt); add("int_" + name, name, a, a.astype(np.float64))
a = rng.integers(0, 2, 999).astype(np.bool_); add("bool", "BOOL", a, a)
# strided: a (6, 7, 9) array and its (2, 0, 1) transpose as a contiguous copy
a = rng.normal(0, 1, (6, 7, 9)).astype(np.float32)
a.tofile(os.path.join(out, "strided_src.bin"))
t = np.ascontiguousarray(a.transpose(2, 0, 1)); add("strided_t", "F32", t, t)
json.dump(cases, open(os.path.join(out, "cases.json"), "w"))
)PY";

class TensorStatsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::scratch_dir("tensor_stats");
    test::run_numpy(dir_, kScript);
    cases_ = test::read_json(dir_ / "cases.json");
  }
  static std::filesystem::path dir_;
  static nlohmann::json cases_;
};
std::filesystem::path TensorStatsTest::dir_;
nlohmann::json TensorStatsTest::cases_;

void expect_close(double ours, double ref, double scale, const std::string& what) {
  EXPECT_NEAR(ours, ref, 1e-9 * std::max(scale, 1e-300)) << what;
}

void check_against(const TensorStats& s, const nlohmann::json& r) {
  const std::string name = r["name"];
  EXPECT_EQ(s.numel, r["numel"].get<std::int64_t>()) << name;
  EXPECT_EQ(s.nan_count, r["nan"].get<std::int64_t>()) << name;
  EXPECT_EQ(s.pos_inf_count, r["pinf"].get<std::int64_t>()) << name;
  EXPECT_EQ(s.neg_inf_count, r["ninf"].get<std::int64_t>()) << name;
  EXPECT_EQ(s.zero_count, r["zeros"].get<std::int64_t>()) << name;
  EXPECT_EQ(s.finite_count, r["finite"].get<std::int64_t>()) << name;
  if (r["finite"].get<std::int64_t>() == 0) {
    EXPECT_TRUE(std::isnan(s.min) && std::isnan(s.mean) && std::isnan(s.std)) << name;
    return;
  }
  EXPECT_EQ(s.min, r["min"].get<double>()) << name;
  EXPECT_EQ(s.max, r["max"].get<double>()) << name;
  EXPECT_EQ(s.abs_max, r["abs_max"].get<double>()) << name;
  const double scale = std::fabs(r["mean"].get<double>()) + r["std"].get<double>();
  expect_close(s.mean, r["mean"], scale, name + " mean");
  expect_close(s.std, r["std"], scale, name + " std");
  expect_close(s.l2_norm, r["l2"], r["l2"].get<double>(), name + " l2");
}

TEST_F(TensorStatsTest, MatchesNumpyForEveryCase) {
  ASSERT_GE(cases_.size(), 25u);
  for (const auto& r : cases_) {
    const std::string name = r["name"];
    const std::vector<std::uint8_t> raw = test::read_bytes(dir_ / (name + ".bin"));
    TensorView v;
    v.data = raw.data();
    v.dtype = *parse_dtype(r["dtype"].get<std::string>());
    v.shape = {r["numel"].get<std::int64_t>()};
    ASSERT_EQ(static_cast<std::int64_t>(raw.size()), v.nbytes()) << name;
    const TensorStats s = compute_stats(v);
    check_against(s, r);
    EXPECT_EQ(s.bytes, v.nbytes());
    EXPECT_TRUE(s.hashed);
    EXPECT_EQ(s.hash, XXH3_64bits(raw.data(), raw.size())) << name;
  }
}

TEST_F(TensorStatsTest, StridedViewMatchesTransposedCopy) {
  const std::vector<std::uint8_t> src = test::read_bytes(dir_ / "strided_src.bin");
  const std::vector<std::uint8_t> copy = test::read_bytes(dir_ / "strided_t.bin");
  TensorView v{.data = src.data(), .shape = {9, 6, 7}, .strides = {1, 63, 9},
               .dtype = DType::kF32};
  ASSERT_FALSE(v.is_contiguous());
  const TensorStats s = compute_stats(v);
  for (const auto& r : cases_) {
    if (r["name"] == "strided_t") check_against(s, r);
  }
  // Logical-order hashing: the strided view hashes like its contiguous copy.
  EXPECT_EQ(s.hash, XXH3_64bits(copy.data(), copy.size()));
  EXPECT_NE(s.hash, XXH3_64bits(src.data(), src.size()));
}

TEST(TensorStats, NegativeAndSlicedStridesGatherInLogicalOrder) {
  std::vector<std::uint16_t> v(10007);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint16_t>((i * 7919) % 65521);
  const std::vector<std::uint16_t> rev(v.rbegin(), v.rend());
  TensorView flipped{.data = &v.back(), .shape = {10007}, .strides = {-1}, .dtype = DType::kU16};
  TensorView copy{.data = rev.data(), .shape = {10007}, .dtype = DType::kU16};
  const TensorStats a = compute_stats(flipped);
  const TensorStats b = compute_stats(copy);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.min, b.min);
  EXPECT_EQ(a.max, b.max);
  EXPECT_EQ(a.zero_count, b.zero_count);
  EXPECT_NEAR(a.mean, b.mean, 1e-9 * b.mean);
  // Every other column of a (100, 100) matrix: inner stride 2, outer stride 100.
  std::vector<float> m(100 * 100);
  std::vector<float> cols;
  for (int i = 0; i < 100 * 100; ++i) m[i] = static_cast<float>(i % 37) - 18.0f;
  for (int r = 0; r < 100; ++r) {
    for (int c = 0; c < 100; c += 2) cols.push_back(m[r * 100 + c]);
  }
  TensorView sliced{.data = m.data(), .shape = {100, 50}, .strides = {100, 2}};
  TensorView dense{.data = cols.data(), .shape = {100, 50}};
  EXPECT_EQ(compute_stats(sliced).hash, compute_stats(dense).hash);
  EXPECT_DOUBLE_EQ(compute_stats(sliced).std, compute_stats(dense).std);
}

TEST(TensorStats, EmptyTensorHashIsXxh3OfNothing) {
  TensorView v{.data = nullptr, .shape = {0, 4}, .dtype = DType::kF16};
  const TensorStats s = compute_stats(v);
  EXPECT_EQ(s.numel, 0);
  EXPECT_EQ(s.finite_count, 0);
  EXPECT_TRUE(std::isnan(s.mean));
  EXPECT_EQ(s.hash, 0x2D06800538D394C2ull);  // XXH3_64bits("", 0), the published vector
  EXPECT_EQ(hash_hex(s.hash), "2d06800538d394c2");
}

TEST(TensorStats, ThreadedEqualsSingleThreaded) {
  // 12 MiB of f32 so that three threads get >= 4 MiB each.
  std::vector<float> data(3 << 20);
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)) * 7.0 + 100.0);
  }
  data[12345] = std::nanf("");
  TensorView v{.data = data.data(), .shape = {static_cast<std::int64_t>(data.size())}};
  const TensorStats one = compute_stats(v, {.hash = true, .threads = 1});
  const TensorStats three = compute_stats(v, {.hash = true, .threads = 3});
  EXPECT_EQ(one.hash, three.hash);
  EXPECT_EQ(one.nan_count, 1);
  EXPECT_EQ(three.nan_count, 1);
  EXPECT_EQ(one.min, three.min);
  EXPECT_EQ(one.max, three.max);
  EXPECT_NEAR(one.mean, three.mean, 1e-12 * 100);
  EXPECT_NEAR(one.std, three.std, 1e-10);
  const TensorStats nohash = compute_stats(v, {.hash = false, .threads = 2});
  EXPECT_FALSE(nohash.hashed);
  EXPECT_EQ(nohash.hash, 0u);
}

TEST(TensorStats, InvalidViewsAreNamedErrors) {
  float x = 1;
  TensorView neg{.data = &x, .shape = {-1}};
  try {
    compute_stats(neg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidShape");
  }
  TensorView bad_strides{.data = &x, .shape = {1, 1}, .strides = {1}};
  try {
    compute_stats(bad_strides);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidStrides");
  }
  TensorView null{.data = nullptr, .shape = {3}};
  try {
    compute_stats(null);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "NullData");
  }
}

}  // namespace
}  // namespace genscope

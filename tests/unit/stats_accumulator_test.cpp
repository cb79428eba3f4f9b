// StatsAccumulator: a tensor's statistics from consecutive pieces equal compute_stats' of the
// whole (a decoded video copied to the host a piece at a time).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "genscope/error.hpp"
#include "genscope/tensor_stats.hpp"

namespace genscope {
namespace {

void expect_same(const TensorStats& a, const TensorStats& b) {
  EXPECT_EQ(a.numel, b.numel);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.finite_count, b.finite_count);
  EXPECT_EQ(a.nan_count, b.nan_count);
  EXPECT_EQ(a.pos_inf_count, b.pos_inf_count);
  EXPECT_EQ(a.neg_inf_count, b.neg_inf_count);
  EXPECT_EQ(a.zero_count, b.zero_count);
  EXPECT_EQ(a.min, b.min);
  EXPECT_EQ(a.max, b.max);
  EXPECT_EQ(a.abs_max, b.abs_max);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.hashed, b.hashed);
}

// A "video" (1, 3, frames, h, w) of float32 with a few special values.
std::vector<float> video(std::int64_t n) {
  std::vector<float> data(static_cast<std::size_t>(n));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.25f, 0.5f);
  for (float& x : data) x = normal(rng);
  data[11] = std::numeric_limits<float>::quiet_NaN();
  data[static_cast<std::size_t>(n / 2)] = std::numeric_limits<float>::infinity();
  data[static_cast<std::size_t>(n - 3)] = 0.0f;
  return data;
}

TEST(StatsAccumulator, PiecesOfWholeRunsAreBitIdenticalToOnePass) {
  const std::vector<std::int64_t> shape{1, 3, 21, 240, 416};  // 6.3 M elements, 25 MB
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  const std::vector<float> data = video(n);
  const TensorView whole{.data = data.data(), .shape = shape};
  const TensorStats one = compute_stats(whole, {.hash = true, .threads = 1});
  const std::int64_t piece = StatsAccumulator::piece_elements(DType::kF32, 4 << 20);
  EXPECT_LE(piece * 4, 4 << 20);
  EXPECT_GT(piece * 4, 3 << 20);
  StatsAccumulator acc(DType::kF32);
  int pieces = 0;
  for (std::int64_t b = 0; b < n; b += piece, ++pieces) {
    acc.add({.data = data.data() + b, .shape = {std::min(piece, n - b)}});
  }
  EXPECT_GT(pieces, 5);
  const TensorStats s = acc.finish();
  expect_same(s, one);
  EXPECT_EQ(s.mean, one.mean);  // same runs, same merge order
  EXPECT_EQ(s.std, one.std);
  EXPECT_EQ(s.l2_norm, one.l2_norm);
  EXPECT_EQ(s.nan_count, 1);
  EXPECT_EQ(s.pos_inf_count, 1);
  // The threaded whole-tensor pass: the same up to rounding.
  const TensorStats threaded = compute_stats(whole, {.hash = true, .threads = 4});
  expect_same(s, threaded);
  EXPECT_NEAR(s.mean, threaded.mean, 1e-12);
  EXPECT_NEAR(s.std, threaded.std, 1e-12);
}

TEST(StatsAccumulator, UnevenAndStridedPiecesInLogicalOrder) {
  // (frames, channels, h, w) read as (channels, frames, h, w): each channel's frames are one
  // strided piece; the whole is the same permuted view.
  const std::int64_t f = 9, c = 3, h = 64, w = 96;
  const std::vector<float> data = video(f * c * h * w);
  const TensorView permuted{.data = data.data(), .shape = {c, f, h, w},
                            .strides = {h * w, c * h * w, w, 1}};
  const TensorStats one = compute_stats(permuted, {.hash = true, .threads = 1});
  StatsAccumulator acc(DType::kF32);
  for (std::int64_t k = 0; k < c; ++k) {
    acc.add({.data = data.data() + k * h * w, .shape = {f, h, w}, .strides = {c * h * w, w, 1}});
  }
  const TensorStats s = acc.finish();
  expect_same(s, one);
  EXPECT_NEAR(s.mean, one.mean, 1e-12);
  EXPECT_NEAR(s.std, one.std, 1e-12);
}

TEST(StatsAccumulator, NothingAddedAndWrongDtype) {
  StatsAccumulator acc(DType::kF16, false);
  const TensorStats empty = acc.finish();
  EXPECT_EQ(empty.numel, 0);
  EXPECT_FALSE(empty.hashed);
  EXPECT_TRUE(std::isnan(empty.mean));
  const float x = 1.0f;
  try {
    acc.add({.data = &x, .shape = {1}, .dtype = DType::kF32});
    FAIL() << "a float32 piece was accepted into float16 statistics";
  } catch (const Error& e) {
    EXPECT_EQ(e.name(), "InvalidTensor");
  }
  EXPECT_EQ(StatsAccumulator::piece_elements(DType::kF32, 1), 65536);  // one run at least
}

}  // namespace
}  // namespace genscope

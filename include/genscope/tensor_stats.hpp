// Tensor statistics: one fused pass giving counts, range, moments and a content hash.
//
// Example:
//   genscope::TensorView view{.data = ptr, .shape = {1, 77, 768}, .dtype = genscope::DType::kF16};
//   genscope::TensorStats s = genscope::compute_stats(view);
//   if (s.nan_count > 0) { ... }
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "genscope/tensor_view.hpp"

namespace genscope {

/// How compute_stats works.
struct StatsOptions {
  /// Compute the XXH3-64 hash of the raw bytes (fused when single-threaded; threaded runs
  /// hash concurrently on one more thread, as XXH3 is sequential).
  bool hash = true;
  /// Worker threads; 0 = std::thread::hardware_concurrency(). Each thread gets >= 4 MiB.
  unsigned threads = 0;
};

/// Statistics of one tensor. min/max/mean/std/abs_max/l2_norm cover finite values only;
/// they are NaN when the tensor has no finite value.
struct TensorStats {
  std::int64_t numel = 0;         ///< Number of elements.
  std::int64_t bytes = 0;         ///< numel * element size.
  std::int64_t finite_count = 0;  ///< Elements that are neither NaN nor +-Inf.
  std::int64_t nan_count = 0;     ///< NaN elements.
  std::int64_t pos_inf_count = 0; ///< +Inf elements.
  std::int64_t neg_inf_count = 0; ///< -Inf elements.
  std::int64_t zero_count = 0;    ///< Elements equal to zero (+0 and -0).
  double min = 0;                 ///< Smallest finite value.
  double max = 0;                 ///< Largest finite value.
  double mean = 0;                ///< Mean of the finite values.
  double std = 0;                 ///< Population standard deviation of the finite values.
  double abs_max = 0;             ///< Largest |x| over finite values.
  double l2_norm = 0;             ///< sqrt(sum x^2) over finite values.
  bool hashed = false;            ///< True when `hash` was computed.
  std::uint64_t hash = 0;         ///< XXH3_64bits of the raw bytes in logical order (seed 0).

  /// True when any element is NaN or +-Inf.
  bool has_non_finite() const noexcept { return nan_count + pos_inf_count + neg_inf_count > 0; }
};

/// Computes the statistics of `view` (host memory; any dtype, contiguous or strided).
TensorStats compute_stats(const TensorView& view, const StatsOptions& options = {});

/// Statistics of a tensor handed over in consecutive pieces, in logical (row-major) order:
/// a decoded video copied to the host a piece at a time instead of whole. The figures are
/// compute_stats' of the whole tensor: bit-identical to a single-threaded compute_stats when
/// every piece but the last holds a multiple of piece_elements(dtype, ...) elements (the
/// same runs, merged in the same order), equal up to rounding of mean/std otherwise; counts,
/// min, max and the hash are always the same.
class StatsAccumulator {
 public:
  /// `hash`: also the XXH3-64 of the bytes, streamed.
  explicit StatsAccumulator(DType dtype, bool hash = true);
  ~StatsAccumulator();
  StatsAccumulator(StatsAccumulator&&) noexcept;
  StatsAccumulator& operator=(StatsAccumulator&&) noexcept;
  /// Adds the next piece (contiguous or strided; genscope::Error("InvalidTensor") for another
  /// dtype or an invalid view).
  void add(const TensorView& piece);
  /// The statistics of everything added (numel 0 when nothing was).
  TensorStats finish() const;
  /// The largest element count <= max_bytes (at least one run) that keeps the runs of a
  /// single-threaded compute_stats: a multiple of its run length.
  static std::int64_t piece_elements(DType dtype, std::int64_t max_bytes) noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The hash as 16 lower-case hex digits.
std::string hash_hex(std::uint64_t hash);

}  // namespace genscope

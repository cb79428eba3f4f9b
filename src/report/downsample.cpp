// Min/max downsampling (see downsample.hpp): one pass per column, O(rows).
#include "report/downsample.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace genscope::detail {

std::vector<std::size_t> minmax_rows(std::span<const std::int64_t> x, const double* values,
                                     std::size_t stride, std::size_t spans) {
  const std::size_t n = x.size();
  std::vector<std::size_t> rows;
  spans = std::max<std::size_t>(spans, 1);
  if (n <= 2 * spans) {
    rows.resize(n);
    std::iota(rows.begin(), rows.end(), std::size_t{0});
    return rows;
  }
  // Span of a row: (x - min) * spans / (max - min + 1), in unsigned 128-bit arithmetic
  // (nanosecond offsets times spans overflow 64 bits; any int64 range fits).
  const auto [low_x, high_x] = std::minmax_element(x.begin(), x.end());
  const std::uint64_t x0 = static_cast<std::uint64_t>(*low_x);
  const unsigned __int128 width =
      static_cast<unsigned __int128>(static_cast<std::uint64_t>(*high_x) - x0) + 1;
  auto span_of = [&](std::int64_t v) {
    return static_cast<std::size_t>(
        static_cast<unsigned __int128>(static_cast<std::uint64_t>(v) - x0) * spans / width);
  };
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  rows.reserve(2 * spans + 2);
  auto keep = [&rows](std::size_t row) {
    if (row != kNone && (rows.empty() || rows.back() < row)) rows.push_back(row);
  };
  keep(0);
  for (std::size_t i = 0; i < n;) {
    const std::size_t span = span_of(x[i]);
    std::size_t lo = kNone, hi = kNone, gap = kNone;
    double low = std::numeric_limits<double>::infinity();
    double high = -low;
    std::size_t j = i;
    for (; j < n && span_of(x[j]) == span; ++j) {
      const double v = values[j * stride];
      if (std::isnan(v)) {
        if (gap == kNone) gap = j;
        continue;
      }
      if (v < low) low = v, lo = j;
      if (v > high) high = v, hi = j;
    }
    std::size_t picked[3] = {lo, hi, gap};
    std::sort(std::begin(picked), std::end(picked));  // kNone sorts last
    for (std::size_t row : picked) keep(row);
    i = j;
  }
  keep(n - 1);
  return rows;
}

std::vector<std::size_t> minmax_rows(const TimeSeries& series, std::span<const std::size_t> columns,
                                     std::size_t spans) {
  const std::size_t n = series.size();
  const std::size_t width = series.metrics.size();
  std::vector<char> kept(n, 0);
  for (std::size_t column : columns) {
    if (column >= width) continue;
    for (std::size_t row :
         minmax_rows(series.offset_ns, series.values.data() + column, width, spans)) {
      kept[row] = 1;
    }
  }
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < n; ++i) {
    if (kept[i]) rows.push_back(i);
  }
  return rows;
}

}  // namespace genscope::detail

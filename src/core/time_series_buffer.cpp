// Bounded time series with pairwise downsampling of old data.
#include "core/time_series_buffer.hpp"

#include <algorithm>
#include <cmath>

namespace genscope::detail {

TimeSeriesBuffer::TimeSeriesBuffer(std::size_t columns, std::size_t capacity)
    : columns_(columns), capacity_(std::max<std::size_t>(capacity, 4)) {
  times_.reserve(capacity_);
  values_.reserve(capacity_ * columns_);
}

void TimeSeriesBuffer::push(std::int64_t offset_ns, std::span<const double> row) {
  if (times_.size() >= capacity_) compact();
  times_.push_back(offset_ns);
  values_.insert(values_.end(), row.begin(), row.begin() + static_cast<std::ptrdiff_t>(columns_));
  ++pushed_;
}

namespace {
double max_nan(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}
}  // namespace

void TimeSeriesBuffer::compact() {
  // Merge rows [0, half) pairwise into [0, half/2), then move the newer half down.
  const std::size_t n = times_.size();
  const std::size_t half = (n / 2) & ~std::size_t{1};
  std::size_t out = 0;
  for (std::size_t i = 0; i < half; i += 2, ++out) {
    times_[out] = times_[i];
    for (std::size_t c = 0; c < columns_; ++c) {
      values_[out * columns_ + c] =
          max_nan(values_[i * columns_ + c], values_[(i + 1) * columns_ + c]);
    }
  }
  for (std::size_t i = half; i < n; ++i, ++out) {
    times_[out] = times_[i];
    std::copy_n(values_.begin() + static_cast<std::ptrdiff_t>(i * columns_), columns_,
                values_.begin() + static_cast<std::ptrdiff_t>(out * columns_));
  }
  times_.resize(out);
  values_.resize(out * columns_);
}

}  // namespace genscope::detail

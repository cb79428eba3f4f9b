// A bounded buffer of sampled rows. When full, the older half is merged pairwise (keeping the
// maximum of each column and the time of the first sample), so recent data stays at full
// resolution, older data grows coarser, and memory never exceeds capacity rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace genscope::detail {

class TimeSeriesBuffer {
 public:
  TimeSeriesBuffer(std::size_t columns, std::size_t capacity);
  /// Appends one row; compacts first when full.
  void push(std::int64_t offset_ns, std::span<const double> row);
  std::size_t size() const noexcept { return times_.size(); }
  std::size_t columns() const noexcept { return columns_; }
  std::size_t capacity() const noexcept { return capacity_; }
  std::uint64_t pushed() const noexcept { return pushed_; }
  const std::vector<std::int64_t>& times() const noexcept { return times_; }
  const std::vector<double>& values() const noexcept { return values_; }

 private:
  void compact();
  std::size_t columns_;
  std::size_t capacity_;
  std::uint64_t pushed_ = 0;
  std::vector<std::int64_t> times_;
  std::vector<double> values_;
};

}  // namespace genscope::detail

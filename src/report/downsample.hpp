// Min/max downsampling shared by the HTML report and the Chrome trace: long series are cut
// into equal spans of x (time, or iteration number) and each span keeps the rows of its
// minimum and its maximum, so spikes survive and a chart drawn from the kept rows looks
// like one drawn from all of them at screen resolution (one span per pixel column).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "genscope/run.hpp"

namespace genscope::detail {

/// Rows of one column to keep: all rows when there are at most 2 * `spans`; otherwise, per
/// span of x, the rows of the minimum and the maximum (in x order), the first row of a gap
/// (NaN) so gaps stay visible, and always the first and the last row. Rows are returned in
/// row order; `x` is expected sorted (unsorted x still gives valid rows, just more of them).
/// The value of row i is values[i * stride].
std::vector<std::size_t> minmax_rows(std::span<const std::int64_t> x, const double* values,
                                     std::size_t stride, std::size_t spans);

/// The union (sorted, without duplicates) of minmax_rows() over the given columns of a series.
std::vector<std::size_t> minmax_rows(const TimeSeries& series, std::span<const std::size_t> columns,
                                     std::size_t spans);

}  // namespace genscope::detail

// One frame of a tqdm progress bar, parsed from its default format (tqdm/tqdm
// tqdm/std.py `format_meter`, rev 4c956c20):
//
//   {desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]
//   {desc}: {n_fmt}{unit} [{elapsed}, {rate_fmt}{postfix}]           (total unknown)
//
// `desc` is followed by ": " only when it is not empty (and not already ending in ": ");
// rate_fmt is "{rate:5.2f}{unit}/s", "{inv_rate:5.2f}s/{unit}" or "?{unit}/s"; n_fmt and
// total_fmt carry an SI suffix (k, M, G, ...) with unit_scale; elapsed is [H:]MM:SS.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace genscope::watch {

/// A parsed tqdm frame; views point into the parsed line.
struct TqdmFrame {
  std::string_view desc;        ///< without the ": " separator; may be empty
  double n = 0;                 ///< position (n_fmt, SI suffix applied)
  std::optional<double> total;  ///< total_fmt, when known
  std::string_view unit;        ///< "it", "B", ... from the rate; empty when the rate is absent
  std::optional<double> elapsed_seconds;
  bool integral = true;         ///< n and total were plain integers (no SI suffix, no fraction)
  std::string_view rest;        ///< text after the closing ']' (another message on the line)
};

/// Parses `line` as a tqdm frame; nullopt when it is not one.
std::optional<TqdmFrame> parse_tqdm_frame(std::string_view line) noexcept;

}  // namespace genscope::watch

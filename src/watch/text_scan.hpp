// Small parsers shared by the recognisers: numbers, sizes ("2.25 GiB"), clock durations
// ("01:02:03"), and substring helpers. None allocates; all reject rather than guess.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace genscope::watch {

/// `s` without leading and trailing spaces/tabs.
std::string_view trim(std::string_view s) noexcept;
/// True when `s` contains `needle`.
inline bool contains(std::string_view s, std::string_view needle) noexcept {
  return s.find(needle) != std::string_view::npos;
}
/// The text after the first occurrence of `needle`, or nullopt.
std::optional<std::string_view> after(std::string_view s, std::string_view needle) noexcept;
/// A decimal number (optional sign, digits, optional fraction/exponent) filling all of `s`.
std::optional<double> parse_number(std::string_view s) noexcept;
/// The number at the start of `s` (leading spaces skipped); `rest` gets what follows it.
std::optional<double> leading_number(std::string_view s, std::string_view* rest) noexcept;
/// A non-negative integer filling all of `s`.
std::optional<std::int64_t> parse_count(std::string_view s) noexcept;
/// A size with a unit ("2.25 GiB", "512.00 MiB", "300 MB", "17 bytes") in bytes; binary
/// prefixes for both KiB and KB forms, as PyTorch and ComfyUI mean them.
std::optional<double> parse_size_bytes(std::string_view s) noexcept;
/// "SS", "MM:SS", "H:MM:SS" (tqdm, ComfyUI) in seconds.
std::optional<double> parse_clock_seconds(std::string_view s) noexcept;
/// Seconds as nanoseconds (rounded; negative and non-finite values give 0).
std::int64_t seconds_to_ns(double seconds) noexcept;

}  // namespace genscope::watch

// AnchorFilter: the cheap test that keeps unknown lines cheap.
//
// Each recogniser names the literal substrings ("anchors") of which a line it can use must
// contain at least one ("got prompt", "it/s", "[INFO", ...). match() scans a line once,
// looking its two-byte windows up in a 64 Kibit table of the anchors' first two bytes, and
// verifies an anchor only where such a pair occurs; it returns the set of recognisers that
// have an anchor in the line. A line without any anchor (the common case) costs that scan
// and nothing else: no regex, no allocation. Each anchor is looked up by its least common
// two-byte window (not one of the most frequent pairs of English text and indentation), so
// ordinary text rarely leads to a verification.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace genscope::watch {

/// Finds which recognisers (bits 0..63) have an anchor in a line.
class AnchorFilter {
 public:
  /// Registers `anchor` (at least 2 bytes; shorter ones are ignored) for recogniser `bit`.
  void add(std::string_view anchor, unsigned bit);
  /// The bits of the recognisers with at least one anchor in `line`.
  std::uint64_t match(std::string_view line) const noexcept;
  /// True when no anchor is registered.
  bool empty() const noexcept { return anchors_.empty(); }

 private:
  struct Anchor {
    std::string text;
    std::uint64_t bits;
    std::size_t offset;  // position of the two-byte window it is looked up by
  };
  static unsigned pair(unsigned char a, unsigned char b) noexcept { return (a << 8) | b; }
  std::array<std::uint64_t, 1024> table_{};  // one bit per first-two-bytes pair
  std::vector<Anchor> anchors_;
  std::vector<std::pair<std::uint16_t, std::uint16_t>> by_pair_;  // (pair, anchor), sorted
};

}  // namespace genscope::watch

// AnchorFilter: two-byte prefilter table and verification.
#include "watch/anchor_filter.hpp"

#include <algorithm>
#include <cstring>

namespace genscope::watch {

namespace {

// The most frequent two-byte windows of English text and of indented output (the common
// bigrams of letter-frequency tables, and pairs with spaces).
bool common_pair(char a, char b) {
  static const char* const kCommon[] = {
      "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or", "te", "of",
      "ed", "is", "it", "al", "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou", "io", "le",
      "ve", "co", "me", "de", "hi", "ri", "ro", "ic", "ne", "ea", "ra", "ce", "li", "ch", "ll",
      "be", "ma", "si", "om", "ur", "lo", "ad", "el", "ac", "ec", "ct", "pr", "ss", "ts", "ot"};
  if (a == ' ' || b == ' ') return true;
  for (const char* p : kCommon) {
    if (p[0] == a && p[1] == b) return true;
  }
  return false;
}

bool is_plain(char c) { return c == ' ' || (c >= 'a' && c <= 'z'); }

// The window to look an anchor up by: the rarest-looking one (not a common pair, without
// spaces, with capitals, digits or punctuation); the last of equals.
std::size_t lookup_offset(std::string_view anchor) {
  std::size_t best = 0;
  int best_score = -1;
  for (std::size_t i = 0; i + 1 < anchor.size(); ++i) {
    const char a = anchor[i];
    const char b = anchor[i + 1];
    const int score = (a != ' ') + (b != ' ') + 2 * !common_pair(a, b) + (!is_plain(a) || !is_plain(b));
    if (score >= best_score) {
      best_score = score;
      best = i;
    }
  }
  return best;
}

}  // namespace

void AnchorFilter::add(std::string_view anchor, unsigned bit) {
  if (anchor.size() < 2 || bit >= 64) return;
  for (Anchor& a : anchors_) {
    if (a.text == anchor) {
      a.bits |= std::uint64_t{1} << bit;
      return;
    }
  }
  const std::size_t offset = lookup_offset(anchor);
  const unsigned key = pair(static_cast<unsigned char>(anchor[offset]),
                            static_cast<unsigned char>(anchor[offset + 1]));
  const std::pair<std::uint16_t, std::uint16_t> entry{static_cast<std::uint16_t>(key),
                                                      static_cast<std::uint16_t>(anchors_.size())};
  by_pair_.insert(std::upper_bound(by_pair_.begin(), by_pair_.end(), entry), entry);
  anchors_.push_back({std::string(anchor), std::uint64_t{1} << bit, offset});
  table_[key >> 6] |= std::uint64_t{1} << (key & 63);
}

std::uint64_t AnchorFilter::match(std::string_view line) const noexcept {
  std::uint64_t found = 0;
  if (line.size() < 2 || anchors_.empty()) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(line.data());
  const std::size_t n = line.size();
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const unsigned key = pair(p[i], p[i + 1]);
    if ((table_[key >> 6] >> (key & 63) & 1) == 0) continue;
    auto it = std::lower_bound(by_pair_.begin(), by_pair_.end(),
                               std::pair<std::uint16_t, std::uint16_t>{key, 0});
    for (; it != by_pair_.end() && it->first == key; ++it) {
      const Anchor& a = anchors_[it->second];
      if ((found & a.bits) == a.bits || i < a.offset) continue;
      const std::size_t start = i - a.offset;
      if (a.text.size() <= n - start && std::memcmp(p + start, a.text.data(), a.text.size()) == 0) {
        found |= a.bits;
      }
    }
  }
  return found;
}

}  // namespace genscope::watch

// AnchorFilter: two-byte prefilter table and verification.
#include "watch/anchor_filter.hpp"

#include <algorithm>
#include <cstring>

namespace genscope::watch {

void AnchorFilter::add(std::string_view anchor, unsigned bit) {
  if (anchor.size() < 2 || bit >= 64) return;
  for (Anchor& a : anchors_) {
    if (a.text == anchor) {
      a.bits |= std::uint64_t{1} << bit;
      return;
    }
  }
  const unsigned key = pair(static_cast<unsigned char>(anchor[0]),
                            static_cast<unsigned char>(anchor[1]));
  const std::pair<std::uint16_t, std::uint16_t> entry{static_cast<std::uint16_t>(key),
                                                      static_cast<std::uint16_t>(anchors_.size())};
  by_pair_.insert(std::upper_bound(by_pair_.begin(), by_pair_.end(), entry), entry);
  anchors_.push_back({std::string(anchor), std::uint64_t{1} << bit});
  table_[key >> 6] |= std::uint64_t{1} << (key & 63);
}

std::uint64_t AnchorFilter::match(std::string_view line) const noexcept {
  std::uint64_t found = 0;
  if (line.size() < 2) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(line.data());
  const std::size_t n = line.size();
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const unsigned key = pair(p[i], p[i + 1]);
    if ((table_[key >> 6] >> (key & 63) & 1) == 0) continue;
    auto it = std::lower_bound(by_pair_.begin(), by_pair_.end(),
                               std::pair<std::uint16_t, std::uint16_t>{key, 0});
    for (; it != by_pair_.end() && it->first == key; ++it) {
      const Anchor& a = anchors_[it->second];
      if ((found & a.bits) == a.bits) continue;
      if (a.text.size() <= n - i && std::memcmp(p + i, a.text.data(), a.text.size()) == 0) {
        found |= a.bits;
      }
    }
  }
  return found;
}

}  // namespace genscope::watch

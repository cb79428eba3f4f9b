// The end-of-line search of LineSplitter: 16 bytes at a time with SSE2 where available.
#include "watch/line_splitter.hpp"

#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace genscope::watch {

const char* find_line_end(const char* p, const char* end) noexcept {
#if defined(__SSE2__)
  const __m128i nl = _mm_set1_epi8('\n');
  const __m128i cr = _mm_set1_epi8('\r');
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const int mask =
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, nl), _mm_cmpeq_epi8(v, cr)));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    if (*p == '\n' || *p == '\r') return p;
  }
  return end;
}

bool looks_like_finished_frame(std::string_view s) noexcept {
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return false;
  if (s.back() == ']') return true;                                       // tqdm
  return s.size() >= 3 && s.substr(s.size() - 3) == "\x1b[K";              // stable-diffusion.cpp
}

}  // namespace genscope::watch

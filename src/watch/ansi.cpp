// ANSI escape sequence removal (ECMA-48 CSI and OSC forms).
#include "watch/ansi.hpp"

#include <cstring>

namespace genscope::watch {

std::string_view strip_ansi(std::string_view line, std::string& scratch) {
  const void* esc = std::memchr(line.data(), '\x1b', line.size());
  if (esc == nullptr) return line;
  scratch.clear();
  const char* p = line.data();
  const char* const end = p + line.size();
  const char* e = static_cast<const char*>(esc);
  while (true) {
    scratch.append(p, e);
    p = e + 1;  // past ESC
    if (p < end && *p == '[') {
      // CSI: parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, one final byte 0x40-0x7E.
      ++p;
      while (p < end && static_cast<unsigned char>(*p) >= 0x20 &&
             static_cast<unsigned char>(*p) <= 0x3F) {
        ++p;
      }
      if (p < end && static_cast<unsigned char>(*p) >= 0x40 &&
          static_cast<unsigned char>(*p) <= 0x7E) {
        ++p;
      }
    } else if (p < end && *p == ']') {
      // OSC: up to BEL or ST (ESC \).
      ++p;
      while (p < end && *p != '\a' && !(*p == '\x1b' && p + 1 < end && p[1] == '\\')) ++p;
      if (p < end) p += (*p == '\a') ? 1 : 2;
    } else if (p < end) {
      ++p;  // two-byte sequence (ESC 7, ESC M, ...)
    }
    if (p >= end) break;
    e = static_cast<const char*>(std::memchr(p, '\x1b', static_cast<std::size_t>(end - p)));
    if (e == nullptr) {
      scratch.append(p, end);
      break;
    }
  }
  return scratch;
}

}  // namespace genscope::watch

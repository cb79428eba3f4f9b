// LineSplitter: cuts one output stream into lines for the recognisers.
//
// Lines end at '\n' or '\r': a progress bar redraws itself with '\r', so each frame is a
// line of its own. Empty lines are skipped. A line longer than the bound keeps only its first
// `max_line_bytes` bytes (the rest is skipped without being copied, and the line is counted
// as cut), so a 1 MB line or binary garbage costs one scan and never unbounded memory.
//
// Progress frames are written as "\r<frame>" and only end when the next frame's '\r'
// arrives, which for a bar at 24 s/it is 24 s later. So an unterminated line that began
// right after a '\r' and looks finished (ends with ']' as a tqdm frame, or with the erase
// sequence ESC[K as a stable-diffusion.cpp frame) is delivered at the end of feed(), marked
// `eager`, with no end yet. When its end arrives, only what was added to it since is
// delivered; if nothing was and the end is '\n', an empty line with LineEnd::kNewline says
// that the eager line ended with '\n' (tqdm.close() ends a bar that way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace genscope::watch {

/// The default bound on the bytes of one line that are kept for matching.
inline constexpr std::size_t kMaxLineBytes = 16 * 1024;

/// How a line ended.
enum class LineEnd : char { kNewline = '\n', kReturn = '\r', kNone = 0 };

/// Splits a byte stream into lines; keeps the unterminated rest for the next feed().
class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line_bytes = kMaxLineBytes)
      : max_(max_line_bytes == 0 ? 1 : max_line_bytes) {}

  /// Calls `on_line(std::string_view line, LineEnd end, bool cut, bool eager)` for every
  /// complete, non-empty line in `bytes`, and for a finished-looking progress frame at its end
  /// (eager; end kNone). The views are valid during the call only.
  template <class F>
  void feed(std::string_view bytes, F&& on_line);
  /// Delivers the unterminated rest, if any, as a last line (LineEnd::kNone).
  template <class F>
  void flush(F&& on_line);
  /// Lines longer than the bound so far.
  std::uint64_t cut_lines() const noexcept { return cut_lines_; }

 private:
  std::size_t max_;
  template <class F>
  void end_pending(LineEnd how, F& on_line);
  std::string pending_;  // start of an unterminated line (at most max_ bytes)
  bool cutting_ = false; // the pending line went past the bound: skip until its end
  bool after_return_ = false;  // the current line began right after a '\r'
  std::size_t delivered_ = 0;  // bytes of pending_ already delivered eagerly
  std::uint64_t cut_lines_ = 0;
};

/// True when `s` (a line after '\r') ends like a finished progress frame.
bool looks_like_finished_frame(std::string_view s) noexcept;

/// Position of the first '\n' or '\r' in [p, end), or end.
const char* find_line_end(const char* p, const char* end) noexcept;

template <class F>
void LineSplitter::end_pending(LineEnd how, F& on_line) {
  const bool cut = cutting_;
  if (cut) ++cut_lines_;
  const std::string_view fresh = std::string_view(pending_).substr(delivered_);
  if (!fresh.empty()) {
    on_line(fresh, how, cut, false);
  } else if (delivered_ > 0 && how == LineEnd::kNewline) {
    on_line(std::string_view(), how, false, false);  // the eager line ended with '\n'
  }
  pending_.clear();
  cutting_ = false;
  delivered_ = 0;
}

template <class F>
void LineSplitter::feed(std::string_view bytes, F&& on_line) {
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  while (p < end) {
    const char* eol = find_line_end(p, end);
    const std::size_t len = static_cast<std::size_t>(eol - p);
    if (eol == end) {
      // Unterminated: keep what fits within the bound.
      if (!cutting_) {
        const std::size_t room = max_ - pending_.size();
        if (len > room) {
          pending_.append(p, room);
          cutting_ = true;
        } else {
          pending_.append(p, len);
        }
      }
      break;
    }
    const LineEnd how = *eol == '\n' ? LineEnd::kNewline : LineEnd::kReturn;
    if (pending_.empty() && !cutting_) {
      // Fast path: the whole line is in this chunk, no copy.
      if (len > max_) {
        ++cut_lines_;
        on_line(std::string_view(p, max_), how, true, false);
      } else if (len > 0) {
        on_line(std::string_view(p, len), how, false, false);
      }
    } else {
      if (!cutting_) {
        const std::size_t room = max_ - pending_.size();
        if (len > room) {
          pending_.append(p, room);
          cutting_ = true;
        } else {
          pending_.append(p, len);
        }
      }
      end_pending(how, on_line);
    }
    after_return_ = how == LineEnd::kReturn;
    p = eol + 1;
  }
  if (after_return_ && !cutting_ && pending_.size() > delivered_ &&
      looks_like_finished_frame(std::string_view(pending_).substr(delivered_))) {
    on_line(std::string_view(pending_).substr(delivered_), LineEnd::kNone, false, true);
    delivered_ = pending_.size();
  }
}

template <class F>
void LineSplitter::flush(F&& on_line) {
  if (!pending_.empty() || cutting_) end_pending(LineEnd::kNone, on_line);
  after_return_ = false;
}

}  // namespace genscope::watch

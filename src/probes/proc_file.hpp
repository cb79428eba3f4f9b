// Private helpers for the procfs probes: a file descriptor kept open and re-read with
// pread (no open/close per sample), and allocation-free parsers for the few procfs
// formats genscope reads.
//
//   /proc/self/statm    "size resident shared text lib data dt\n"   (pages)
//   /proc/self/status   "Key:\t<spaces>value kB\n" lines (VmHWM, VmRSS, ...)
//   /proc/meminfo       "Key:<spaces>value kB\n" lines (MemTotal, MemAvailable, ...)
//   /proc/<pid>/stat    "pid (comm) state ppid pgrp ... starttime ..."  (comm may hold
//                       spaces and parentheses: it ends at the LAST ')'; starttime is
//                       field 22, in clock ticks since boot)
//   cgroup.procs, /proc/<pid>/task/<tid>/children   decimal pids separated by blanks/newlines
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace genscope::detail {

/// An fd opened once and read from offset 0 with pread on every call (thread-safe:
/// pread does not move a shared file offset). Closed on destruction.
class ProcFile {
 public:
  ProcFile() = default;
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;
  ProcFile(ProcFile&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ProcFile& operator=(ProcFile&& other) noexcept;
  ~ProcFile();

  /// Opens `path` with `flags` (O_RDONLY, O_WRONLY); returns an error text or "".
  std::string open(const char* path, int flags);
  /// True when open() succeeded.
  bool is_open() const noexcept { return fd_ >= 0; }
  /// Reads up to `capacity` bytes from offset 0; returns the byte count or -errno.
  long read_into(char* buffer, std::size_t capacity) const noexcept;
  /// Writes `text` at offset 0; returns 0 or -errno.
  int write_text(std::string_view text) const noexcept;

 private:
  int fd_ = -1;
};

/// Parses an unsigned decimal at `text[pos]`, skipping leading blanks; advances `pos`.
std::optional<std::uint64_t> parse_decimal(std::string_view text, std::size_t& pos) noexcept;

/// The resident page count: the second field of /proc/self/statm.
std::optional<std::uint64_t> parse_statm_resident_pages(std::string_view text) noexcept;

/// The value of a "Key: value kB" line (key without the colon) in bytes, or nullopt when
/// the key is absent or malformed. Keys match whole line starts only.
std::optional<std::uint64_t> parse_kb_field(std::string_view text, std::string_view key) noexcept;

/// The fields of /proc/<pid>/stat genscope uses.
struct ProcStat {
  std::string_view comm;           ///< Without the parentheses (points into the parsed text).
  char state = '?';                ///< R, S, D, Z, T, ...
  std::uint64_t ppid = 0;
  std::uint64_t start_ticks = 0;   ///< starttime: clock ticks after boot (tells pid reuse apart).
};

/// Parses /proc/<pid>/stat; nullopt when malformed.
std::optional<ProcStat> parse_proc_stat(std::string_view text) noexcept;

/// Calls `fn(pid)` for every decimal in a blank/newline separated pid list (cgroup.procs,
/// task children). Returns false (after the pids before it) at a token that is not a
/// positive decimal below 2^31.
template <class F>
bool for_each_pid(std::string_view text, F&& fn) {
  std::size_t pos = 0;
  for (;;) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\t')) ++pos;
    if (pos >= text.size()) return true;
    const auto value = parse_decimal(text, pos);
    if (!value || *value == 0 || *value > 0x7fffffffu) return false;
    if (pos < text.size() && text[pos] != ' ' && text[pos] != '\n' && text[pos] != '\t') return false;
    fn(static_cast<int>(*value));
  }
}

/// strerror_r text for `errno_value`, e.g. "Permission denied".
std::string errno_text(int errno_value);

}  // namespace genscope::detail

// The event channel's identity: "<st_dev>:<st_ino>" of the pipe `genscope run` created for
// CMD, put in CMD's environment as GENSCOPE_EVENTS_ID (kIdVariable) next to
// GENSCOPE_EVENTS_FD (kFdVariable). The in-process sink writes only into a descriptor whose
// identity is that one, so a stale or inherited GENSCOPE_EVENTS_FD (a worker started with
// close_fds whose descriptor N is now its own result file) is never written into.
#pragma once

#include <sys/stat.h>

#include <string>

namespace genscope::event_line {

/// The identity of what `fd` refers to, or "" when it cannot be read.
inline std::string channel_id(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return {};
  return std::to_string(static_cast<unsigned long long>(st.st_dev)) + ":" +
         std::to_string(static_cast<unsigned long long>(st.st_ino));
}

}  // namespace genscope::event_line

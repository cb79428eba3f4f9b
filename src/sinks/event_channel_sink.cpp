// EventChannelSink: bounded, signal-safe writes of event lines to the parent (see the header).
#include "sinks/event_channel_sink.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/utc_time.hpp"
#include "event_line/channel_id.hpp"
#include "event_line/encode.hpp"
#include "event_line/format.hpp"
#include "genscope/error.hpp"
#include "genscope/step.hpp"

namespace genscope::detail {

namespace {

constexpr int kWaitMs = 100;

// Blocks SIGPIPE on this thread for the duration of a write; a SIGPIPE the write raised is
// taken off the thread's pending set, so the process never sees it.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigpending(&pending_);
    was_pending_ = sigismember(&pending_, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~NoSigpipe() {
    if (!blocked_) return;
    if (!was_pending_) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  sigset_t pending_{};
  bool was_pending_ = false;
  bool blocked_ = false;
};

}  // namespace

EventChannelSink::EventChannelSink(const std::string& fd_text, const std::string& id_text)
    : pid_(static_cast<int>(::getpid())) {
  // Several monitors of one process each forward: refs must not meet.
  static std::atomic<int> next_sink{1};
  sink_number_ = next_sink.fetch_add(1);
  const std::string fd_var(event_line::kFdVariable);
  const std::string id_var(event_line::kIdVariable);
  int fd = -1;
  const auto [ptr, ec] = std::from_chars(fd_text.data(), fd_text.data() + fd_text.size(), fd);
  if (ec != std::errc() || ptr != fd_text.data() + fd_text.size() || fd < 0) {
    setup_error_ = fd_var + "=\"" + fd_text + "\" is not a descriptor number; nothing is forwarded";
    return;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) {
    setup_error_ = fd_var + "=" + fd_text + " is not an open descriptor (" +
                   std::strerror(errno) + "); nothing is forwarded";
    return;
  }
  // Nothing is written into a descriptor that is not the pipe genscope made for us: a stale
  // variable (its number now a file of ours) or one without genscope's identity is ignored.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
    setup_error_ = fd_var + "=" + fd_text +
                   " is not a pipe (a stale variable?); nothing is written into it";
    return;
  }
  if (id_text.empty()) {
    setup_error_ = fd_var + "=" + fd_text +
                   " without " + id_var + " (not set by genscope run); nothing is written into it";
    return;
  }
  if (event_line::channel_id(fd) != id_text) {
    setup_error_ = fd_var + "=" + fd_text + " is not genscope's event channel (" + id_var + "=" +
                   id_text + " names another pipe; a stale variable?); nothing is written into it";
    return;
  }
  if ((flags & O_ACCMODE) == O_RDONLY) {
    setup_error_ = fd_var + "=" + fd_text + " is open for reading only; nothing is forwarded";
    return;
  }
  socket_ = S_ISSOCK(st.st_mode);
  // Our own descriptor of the same pipe (never reopened by path): writes of at most PIPE_BUF
  // after POLLOUT, so they cannot block whatever the description's O_NONBLOCK.
  fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (fd_ < 0) setup_error_ = fd_var + "=" + fd_text + ": " + std::strerror(errno);
}

EventChannelSink::~EventChannelSink() {
  if (fd_ >= 0) ::close(fd_);
}

std::string EventChannelSink::ref(int step_id) const {
  return event_line::forwarded_ref(pid_, sink_number_, run_seq_, step_id);
}

void EventChannelSink::write_line(std::string line) {
  if (!setup_error_.empty()) throw Error("EventChannel", setup_error_);
  if (gone_) return;  // reported once already
  if (cut_line_) line.insert(line.begin(), '\n');  // ends the line cut short before
  line += '\n';
  NoSigpipe guard;
  std::size_t done = 0;
  int waited_ms = 0;
  const int budget_ms = stalled_ ? 0 : kWaitMs;
  while (done < line.size()) {
    std::size_t chunk = line.size() - done;
    // At most PIPE_BUF after POLLOUT (which promises that much room): the write cannot block.
    if (!socket_) chunk = std::min<std::size_t>(chunk, PIPE_BUF);
    if (!socket_) {
      pollfd p{fd_, POLLOUT, 0};
      const int r = ::poll(&p, 1, budget_ms - waited_ms > 0 ? budget_ms - waited_ms : 0);
      if (r <= 0 || (p.revents & POLLOUT) == 0) {
        if (r > 0 && (p.revents & (POLLERR | POLLHUP)) != 0) {
          gone_ = true;
          throw Error("EventChannel", "the parent closed the event channel; nothing more is forwarded");
        }
        break;
      }
    }
    const ssize_t n = socket_ ? ::send(fd_, line.data() + done, chunk, MSG_DONTWAIT | MSG_NOSIGNAL)
                              : ::write(fd_, line.data() + done, chunk);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) {
      gone_ = true;
      throw Error("EventChannel", "the parent closed the event channel; nothing more is forwarded");
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      throw Error("EventChannel", std::string("writing the event channel failed: ") + std::strerror(errno));
    }
    // No room: wait for some, within the budget.
    if (waited_ms >= budget_ms) break;
    pollfd p{fd_, POLLOUT, 0};
    const auto t0 = std::chrono::steady_clock::now();
    ::poll(&p, 1, budget_ms - waited_ms);
    waited_ms += static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - t0).count()) + 1;
  }
  if (done == line.size()) {
    stalled_ = false;
    cut_line_ = false;
    return;
  }
  stalled_ = true;
  cut_line_ = done > 0;
  throw Error("EventChannel", "the parent is not reading the event channel: lines were dropped");
}

void EventChannelSink::run_started(const Run& run) {
  ++run_seq_;
  // The run's start on the steady clock (CLOCK_MONOTONIC is shared by the processes of one
  // machine, so the parent can place forwarded steps on its own timeline).
  run_start_steady_ns_ = Step::now_ns() - (unix_now_ns() - run.start_unix_ns);
  write_line(event_line::encode_run_begin(run));
}

void EventChannelSink::step_began(const StepRecord& step) {
  write_line(event_line::encode_begin(step, ref(step.id)));
}

void EventChannelSink::step_ended(const StepRecord& step) {
  write_line(event_line::encode_step(step, ref(step.id), run_start_steady_ns_ + step.start_offset_ns));
}

void EventChannelSink::run_finished(const Run& run) { write_line(event_line::encode_run_end(run)); }

std::shared_ptr<Sink> make_event_channel_sink_from_env() {
  const char* env = std::getenv(std::string(event_line::kFdVariable).c_str());
  if (env == nullptr || *env == '\0') return nullptr;
  const char* id = std::getenv(std::string(event_line::kIdVariable).c_str());
  return std::make_shared<EventChannelSink>(env, id != nullptr ? id : "");
}

}  // namespace genscope::detail

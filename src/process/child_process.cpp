// ChildProcess: spawn (fork + exec with an error pipe), pass-through loop, signal forwarding.
//
//            genscope                                  CMD
//   fd 1 ◄── write ◄── read ◄── out pipe / pty 1 ◄── fd 1
//   fd 2 ◄── write ◄── read ◄── err pipe / pty 2 ◄── fd 2
//   fd 0 ─────────────────── inherited ─────────────► fd 0
//   event_line() ◄── split ◄── read ◄── event pipe ◄── fd $GENSCOPE_EVENTS_FD
//   signalfd: SIGCHLD (reap) · SIGINT/SIGTERM/SIGHUP (forward) · SIGWINCH (pty size)
//
// Forwarding rule: a signal sent by the terminal driver (si_code SI_KERNEL: Ctrl-C, hangup)
// already reached CMD, which shares genscope's process group, so it is not sent again;
// a signal sent by a process (kill, si_code SI_USER/SI_QUEUE) went to genscope alone and is
// forwarded. genscope itself never dies of them: it waits for CMD and returns its status.
#include "genscope/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string_view>

#include "event_line/channel_id.hpp"
#include "event_line/format.hpp"
#include "genscope/error.hpp"
#include "genscope/step.hpp"
#include "process/fd.hpp"

extern char** environ;

namespace genscope {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
constexpr std::size_t kChunk = 256 * 1024;
// An event line's limit (docs/run.md): a longer one is delivered cut one byte past it (so
// that it is reported as too long), and the rest of it, up to its '\n', is skipped.
constexpr std::size_t kMaxEventLine = event_line::kMaxLineBytes;

[[noreturn]] void spawn_failed(const std::string& what) {
  throw Error("SpawnFailed", what + ": " + std::strerror(errno));
}

// Writes all of `data` to `fd`; false on an error other than EINTR/EAGAIN (errno set).
bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {  // a non-blocking stdout we inherited: wait until it drains
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool is_pipe(int fd) {
  struct stat st{};
  return ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

struct TeeResult {
  std::size_t bytes = 0;  ///< duplicated onto `out` (0: `in` is at its end)
  int failed = 0;         ///< errno of a failure (EINVAL: not two pipes; EPIPE: no reader)
};

// tee(2) of up to `size` bytes from pipe `in` to pipe `out`, waiting while `out` is full.
TeeResult tee_some(int in, int out, std::size_t size) {
  for (;;) {
    const ssize_t n = ::tee(in, out, size, 0);
    if (n >= 0) return {static_cast<std::size_t>(n), 0};
    if (errno != EAGAIN) return {0, errno};
    pollfd p{out, POLLOUT, 0};  // a non-blocking stdout we inherited: wait until it drains
    ::poll(&p, 1, -1);
  }
}

// One read(); with `exact`, as many as it takes to get `size` bytes known to be waiting.
ssize_t read_some(int fd, char* data, std::size_t size, bool exact) {
  if (!exact) return ::read(fd, data, size);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, data + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

double own_hwm_bytes() {
  rusage u{};
  return ::getrusage(RUSAGE_SELF, &u) == 0 ? static_cast<double>(u.ru_maxrss) * 1024.0 : 0.0;
}

}  // namespace

struct ChildProcess::Impl {
  ChildOptions options;
  pid_t pid = -1;
  double spawn_hwm = 0;
  // Our ends and the program's ends of its stdout/stderr and of the event channel.
  detail::Fd out_read, out_write, err_read, err_write, events_read, events_write;
  detail::Fd signals;  // signalfd
  detail::Fd lifeline;  // write end; the guardian takes CMD's output over when it closes unsaid
  pid_t guardian_pid = -1;
  void release_guardian() noexcept;  // CMD exited: the guardian exits
  sigset_t old_mask{};
  struct sigaction old_pipe{};
  bool mask_saved = false;
  bool stdout_broken = false, stderr_broken = false;
  std::string event_buffer;
  std::string observer_error;
  std::vector<char> buffer = std::vector<char>(kChunk);

  // A stream of ours that cannot be written (other than a reader gone: EPIPE): CMD's output
  // on it is still read and analysed, no longer passed on; said once in pass_through_notes.
  bool stream_dropped[3] = {false, false, false};
  std::vector<std::string> notes;
  void drop_stream(int stream, int error) {
    stream_dropped[stream] = true;
    notes.push_back(std::string("genscope's ") + (stream == 1 ? "stdout" : "stderr") +
                    " cannot be written (" + std::strerror(error) +
                    "): CMD's output on it is read for steps but no longer passed on");
  }
  void make_channels();
  void start_guardian();
  void make_pty(detail::Fd& master, detail::Fd& slave);
  void copy_window_size();
  void call(ChildObserver& observer, const std::function<void()>& fn);
};

void ChildProcess::Impl::make_pty(detail::Fd& master, detail::Fd& slave) {
  master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master.ok()) spawn_failed("posix_openpt");
  if (::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0) spawn_failed("grantpt");
  char name[128];
  if (::ptsname_r(master.get(), name, sizeof name) != 0) spawn_failed("ptsname");
  slave.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave.ok()) spawn_failed(std::string("open ") + name);
  termios t{};
  if (::tcgetattr(slave.get(), &t) == 0) {
    t.c_oflag &= ~static_cast<tcflag_t>(OPOST);  // no "\n" -> "\r\n": bytes pass unchanged
    ::tcsetattr(slave.get(), TCSANOW, &t);
  }
}

void ChildProcess::Impl::copy_window_size() {
  winsize size{};
  bool found = false;
  for (int fd : {1, 2, 0}) {
    if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
      found = true;
      break;
    }
  }
  if (!found) size = winsize{24, 80, 0, 0};  // no terminal of our own: the classic size
  ::ioctl(out_write.get(), TIOCSWINSZ, &size);
  ::ioctl(err_write.get(), TIOCSWINSZ, &size);
}

void ChildProcess::Impl::make_channels() {
  if (options.pty) {
    make_pty(out_read, out_write);
    make_pty(err_read, err_write);
    copy_window_size();
  } else {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) spawn_failed("pipe");
    out_read.reset(p[0]);
    out_write.reset(p[1]);
    if (::pipe2(p, O_CLOEXEC) != 0) spawn_failed("pipe");
    err_read.reset(p[0]);
    err_write.reset(p[1]);
    // Larger pipes mean fewer wake-ups at high throughput (refused beyond the system's
    // pipe-max-size: then the default 64 KiB stays).
    ::fcntl(out_read.get(), F_SETPIPE_SZ, 1 << 20);
    ::fcntl(err_read.get(), F_SETPIPE_SZ, 1 << 20);
  }
  if (options.event_channel) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) spawn_failed("pipe");
    events_read.reset(p[0]);
    events_write.reset(p[1]);
  }
}

void ChildProcess::Impl::call(ChildObserver& observer, const std::function<void()>& fn) {
  (void)observer;
  if (!observer_error.empty()) return;
  try {
    fn();
  } catch (const std::exception& e) {
    observer_error = e.what();
  } catch (...) {
    observer_error = "non-standard exception";
  }
}

// The guardian: a child process holding copies of the read ends of CMD's pipes and of
// genscope's stdout/stderr, and the read end of a lifeline pipe whose write end only genscope
// holds. Once CMD exited genscope says so on the lifeline ('x'), and the guardian exits (it is
// reaped like any child, and not reported to the observer). When genscope is killed (SIGKILL, a crash) the lifeline closes unsaid: the guardian
// then passes CMD's output on as genscope did (and drains the event channel), so CMD runs to
// its end instead of dying of SIGPIPE at its next write. "1" on the lifeline: genscope released
// its stdout (CMD's stdout ended), the guardian drops its copies of it; "o"/"e": genscope
// closed CMD's stdout/stderr pipe (its own reader went away), the guardian closes its copy.
namespace {

[[noreturn]] void guardian_main(int lifeline, int out, int err, int events) noexcept {
  const int keep[] = {lifeline, out, err, events};
  int highest = 2;
  for (int fd : keep) highest = std::max(highest, fd);
  for (int fd = 3; fd <= highest; ++fd) {
    bool needed = false;
    for (int k : keep) needed = needed || k == fd;
    if (!needed) ::close(fd);
  }
#ifdef SYS_close_range
  ::syscall(SYS_close_range, highest + 1, ~0U, 0);
#endif
  ::prctl(PR_SET_NAME, "genscope-guard", 0, 0, 0);
  for (;;) {
    char c;
    const ssize_t n = ::read(lifeline, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (c == 'x') ::_exit(0);  // genscope ended normally
    if ((c == '1' || c == 'o') && out >= 0) {  // genscope closed CMD's stdout pipe
      ::close(out);
      out = -1;
    }
    if (c == 'e' && err >= 0) {  // genscope closed CMD's stderr pipe (its reader went away)
      ::close(err);
      err = -1;
    }
    if (c == '1') ::close(1);  // genscope released its stdout
  }
  // genscope is gone: pass CMD's output on until every writer closed it.
  int sources[3] = {out, err, events};
  const int targets[3] = {1, 2, -1};
  char buffer[65536];
  for (;;) {
    pollfd fds[3];
    int map[3];
    int count = 0;
    for (int i = 0; i < 3; ++i) {
      if (sources[i] < 0) continue;
      map[count] = i;
      fds[count++] = {sources[i], POLLIN, 0};
    }
    if (count == 0) ::_exit(0);
    if (::poll(fds, static_cast<nfds_t>(count), -1) < 0) {
      if (errno == EINTR) continue;
      ::_exit(1);
    }
    for (int k = 0; k < count; ++k) {
      if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const int i = map[k];
      const ssize_t n = ::read(sources[i], buffer, sizeof buffer);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      bool keep_source = n > 0;
      if (n > 0 && targets[i] >= 0) {
        const char* data = buffer;
        std::size_t left = static_cast<std::size_t>(n);
        while (left > 0) {
          const ssize_t w = ::write(targets[i], data, left);
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) {
            // Our reader is gone too (EPIPE): CMD learns it as it would without genscope.
            keep_source = errno != EPIPE;
            break;
          }
          data += w;
          left -= static_cast<std::size_t>(w);
        }
      }
      if (!keep_source) {
        ::close(sources[i]);
        sources[i] = -1;
      }
    }
  }
}

}  // namespace

void ChildProcess::Impl::start_guardian() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return;  // no guardian: CMD would get EPIPE if genscope is killed
  detail::Fd read_end(p[0]), write_end(p[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return;
  if (pid == 0) {
    // Async-signal-safe calls only from here on.
    ::close(write_end.get());
    ::close(out_write.get());
    ::close(err_write.get());
    if (events_write.ok()) ::close(events_write.get());
    guardian_main(read_end.get(), out_read.get(), err_read.get(),
                  events_read.ok() ? events_read.get() : -1);
  }
  guardian_pid = pid;
  lifeline = std::move(write_end);
}

void ChildProcess::Impl::release_guardian() noexcept {
  if (!lifeline.ok()) return;
  (void)!::write(lifeline.get(), "x", 1);
  lifeline.reset();
}

ChildProcess::ChildProcess(ChildOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = std::move(options);
  if (m.options.argv.empty()) throw Error("SpawnFailed", "no program to run");
  m.make_channels();
  sigset_t set;
  sigemptyset(&set);
  for (int s : kForwarded) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGWINCH);
  if (::pthread_sigmask(SIG_BLOCK, &set, &m.old_mask) != 0) spawn_failed("pthread_sigmask");
  m.mask_saved = true;
  m.signals.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!m.signals.ok()) spawn_failed("signalfd");
  // A reader of our stdout that goes away must not kill genscope (it tells CMD instead).
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &m.old_pipe);
  if (m.options.guardian) m.start_guardian();
  if (m.options.adopt_orphans) ::prctl(PR_SET_CHILD_SUBREAPER, 1);
}

ChildProcess::~ChildProcess() {
  Impl& m = *impl_;
  m.release_guardian();
  if (m.guardian_pid > 0) {  // reaped here when run() did not (it was not called, or failed)
    int status = 0;
    while (::waitpid(m.guardian_pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (m.mask_saved) {
    m.signals.reset();
    // Drop what is still pending (e.g. a SIGINT forwarded at the very end) before the
    // default dispositions apply again.
    sigset_t pending;
    sigpending(&pending);
    const timespec zero{0, 0};
    for (int s : kForwarded) {
      if (sigismember(&pending, s)) {
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, s);
        ::sigtimedwait(&one, nullptr, &zero);
      }
    }
    ::sigaction(SIGPIPE, &m.old_pipe, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &m.old_mask, nullptr);
  }
}

void ChildProcess::start() {
  Impl& m = *impl_;
  if (m.pid > 0) throw Error("SpawnFailed", "the program was already started");
  // Everything the child needs is prepared before fork: it may only make async-signal-safe
  // calls afterwards (other threads may hold the allocator's locks).
  std::vector<char*> argv;
  for (std::string& a : m.options.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string procs = m.options.cgroup.empty() ? std::string()
                                                      : (m.options.cgroup / "cgroup.procs").string();
  detail::Fd procs_fd;
  if (!procs.empty()) {
    procs_fd.reset(::open(procs.c_str(), O_WRONLY | O_CLOEXEC));
    if (!procs_fd.ok()) spawn_failed("open " + procs);
  }
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) spawn_failed("pipe");
  detail::Fd error_read(error_pipe[0]), error_write(error_pipe[1]);
  // The event channel's number in CMD: a single digit when one is free (not inherited by CMD
  // and not needed by the child before exec), since POSIX sh (dash) cannot redirect to
  // descriptors above 9 (`printf ... >&"$GENSCOPE_EVENTS_FD"`).
  int events_fd = m.events_write.ok() ? m.events_write.get() : -1;
  if (events_fd > 9) {
    for (int n = 3; n <= 9; ++n) {
      if (n == error_write.get() || n == procs_fd.get() || n == m.out_write.get() ||
          n == m.err_write.get())
        continue;
      const int flags = ::fcntl(n, F_GETFD);
      if (flags < 0 || (flags & FD_CLOEXEC) != 0) {  // closed, or closed by exec anyway
        events_fd = n;
        break;
      }
    }
  }
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto is = [&](std::string_view var) {
      return entry.size() > var.size() && entry.starts_with(var) && entry[var.size()] == '=';
    };
    if (!is(event_line::kFdVariable) && !is(event_line::kIdVariable)) {
      env_storage.emplace_back(entry);
    }
  }
  if (events_fd >= 0) {
    env_storage.push_back(std::string(event_line::kFdVariable) + "=" + std::to_string(events_fd));
    // The pipe's identity: the in-process sink writes only into this very pipe.
    env_storage.push_back(std::string(event_line::kIdVariable) + "=" +
                          event_line::channel_id(m.events_write.get()));
  }
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  m.spawn_hwm = own_hwm_bytes();

  const pid_t pid = ::fork();
  if (pid < 0) spawn_failed("fork");
  if (pid == 0) {
    // --- child: async-signal-safe calls only ---
    int stage = 0;  // 0: cgroup, 1: stdio, 2: exec
    auto fail = [&](int err) {
      const int report[2] = {stage, err};
      (void)!::write(error_write.get(), report, sizeof report);
      ::_exit(127);
    };
    if (procs_fd.ok() && ::write(procs_fd.get(), "0", 1) != 1) fail(errno);
    stage = 1;
    if (::dup2(m.out_write.get(), 1) < 0 || ::dup2(m.err_write.get(), 2) < 0) fail(errno);
    if (events_fd >= 0 && events_fd != m.events_write.get()) {
      if (::dup2(m.events_write.get(), events_fd) < 0) fail(errno);  // the copy is not CLOEXEC
    } else if (events_fd >= 0) {
      const int flags = ::fcntl(events_fd, F_GETFD);
      ::fcntl(events_fd, F_SETFD, flags & ~FD_CLOEXEC);
    }
    ::sigaction(SIGPIPE, &m.old_pipe, nullptr);
    ::sigprocmask(SIG_SETMASK, &m.old_mask, nullptr);
    stage = 2;
    ::execvpe(argv[0], argv.data(), envp.data());
    fail(errno);
  }
  // --- parent ---
  error_write.reset();
  m.out_write.reset();  // only CMD (and its descendants) hold the write ends now
  m.err_write.reset();
  m.events_write.reset();
  int report[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(error_read.get(), report, sizeof report);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof report)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    const std::string program = m.options.argv[0];
    const std::string why = std::strerror(report[1]);
    if (report[0] == 0)
      throw Error("SpawnFailed", "cannot move '" + program + "' into the cgroup " + procs + ": " + why);
    if (report[0] == 1) throw Error("SpawnFailed", "cannot set up the output of '" + program + "': " + why);
    if (report[1] == ENOENT) throw Error("CommandNotFound", "'" + program + "': command not found");
    if (report[1] == EACCES || report[1] == ENOEXEC || report[1] == EISDIR)
      throw Error("CommandNotExecutable", "'" + program + "': " + why);
    throw Error("SpawnFailed", "cannot execute '" + program + "': " + why);
  }
  m.pid = pid;
}

int ChildProcess::pid() const noexcept { return impl_->pid; }
double ChildProcess::spawn_hwm_bytes() const noexcept { return impl_->spawn_hwm; }
const std::string& ChildProcess::observer_error() const noexcept { return impl_->observer_error; }
const std::vector<std::string>& ChildProcess::pass_through_notes() const noexcept {
  return impl_->notes;
}

int ChildProcess::exit_code(int wait_status) noexcept {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

int ChildProcess::run(ChildObserver& observer, std::chrono::milliseconds tick_interval) {
  Impl& m = *impl_;
  if (m.pid <= 0) throw Error("SpawnFailed", "run() before start()");
  int status = 0;
  bool exited = false;
  std::int64_t last_data_ns = 0;
  std::int64_t next_tick = Step::now_ns() + tick_interval.count() * 1'000'000;
  const std::int64_t quiet_ns = m.options.drain_quiet.count() * 1'000'000;

  bool skipping_event_line = false;  // the rest of a line past the limit, until its '\n'
  auto deliver_events = [&](std::string_view chunk, std::int64_t now, bool eof) {
    if (skipping_event_line) {
      const std::size_t nl = chunk.find('\n');
      if (nl == std::string_view::npos) return;
      chunk.remove_prefix(nl + 1);
      skipping_event_line = false;
    }
    m.event_buffer.append(chunk);
    std::size_t start = 0;
    for (;;) {
      const std::size_t nl = m.event_buffer.find('\n', start);
      if (nl == std::string::npos) break;
      const std::string_view line(m.event_buffer.data() + start, nl - start);
      if (line.size() <= kMaxEventLine + 1) {
        m.call(observer, [&] { observer.event_line(line, now); });
      } else {  // over the limit: cut one byte past it, reported as too long
        m.call(observer, [&] { observer.event_line(line.substr(0, kMaxEventLine + 1), now); });
      }
      start = nl + 1;
    }
    m.event_buffer.erase(0, start);
    if (m.event_buffer.size() > kMaxEventLine || (eof && !m.event_buffer.empty())) {
      const bool too_long = m.event_buffer.size() > kMaxEventLine;
      const std::string_view line(m.event_buffer.data(),
                                  std::min(m.event_buffer.size(), kMaxEventLine + 1));
      m.call(observer, [&] { observer.event_line(line, now); });
      m.event_buffer.clear();
      m.event_buffer.shrink_to_fit();
      skipping_event_line = too_long && !eof;
    }
  };

  // Where CMD's stream and ours are both pipes, tee(2) passes the bytes on without copying
  // them through this process; read() then takes exactly those bytes for the observer.
  bool tee_to[3] = {false, !m.options.pty && is_pipe(1), !m.options.pty && is_pipe(2)};

  // Reads what one source has; false at its end (EOF; EIO on a pty whose slave closed).
  auto pump = [&](detail::Fd& source, int stream) -> bool {
    bool& broken = stream == 1 ? m.stdout_broken : m.stderr_broken;
    bool passed = false;  // the bytes read below are already on our stream
    std::size_t want = m.buffer.size();
    if (stream != 0 && tee_to[stream] && !broken && !m.stream_dropped[stream]) {
      const TeeResult t = tee_some(source.get(), stream, want);
      if (t.failed == EINVAL) {
        tee_to[stream] = false;  // not a pipe after all: copy
      } else if (t.failed == EPIPE) {
        broken = true;  // our reader went away: handled as a failed write below
      } else if (t.failed == EINTR) {
        return true;  // poll again
      } else if (t.failed != 0) {
        m.drop_stream(stream, t.failed);  // EBADF (a closed stdout), EIO...: read, not passed on
      } else if (t.bytes > 0) {
        passed = true;
        want = t.bytes;
      }
    }
    const ssize_t n = read_some(source.get(), m.buffer.data(), want, passed);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    const std::int64_t now = Step::now_ns();
    if (n <= 0) {
      if (stream == 0) deliver_events({}, now, true);
      if (stream == 1 && m.options.release_stdout) {
        // CMD's stdout ended: so does ours for whoever reads it (fd 1 stays valid).
        const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0) {
          ::dup2(null, 1);
          ::close(null);
        }
        if (m.lifeline.ok()) (void)!::write(m.lifeline.get(), "1", 1);  // its copy too
      }
      return false;
    }
    last_data_ns = now;
    const std::string_view bytes(m.buffer.data(), static_cast<std::size_t>(n));
    if (stream == 0) {
      deliver_events(bytes, now, false);
      return true;
    }
    if (!passed && !broken && !m.stream_dropped[stream] &&
        !write_all(stream, bytes.data(), bytes.size())) {
      if (errno == EPIPE)
        broken = true;
      else
        m.drop_stream(stream, errno);  // EBADF (a closed stdout), ENOSPC, EIO...
    }
    if (broken) {
      // Our reader went away (EPIPE): close CMD's pipe so that CMD learns it on its next
      // write (SIGPIPE/EPIPE), as it would without genscope in between (the guardian's copy
      // of it too).
      if (m.lifeline.ok()) (void)!::write(m.lifeline.get(), stream == 1 ? "o" : "e", 1);
      source.reset();
      m.call(observer, [&] { observer.output(stream, bytes, now); });
      return false;
    }
    m.call(observer, [&] { observer.output(stream, bytes, now); });
    return true;
  };

  auto reap = [&] {
    for (;;) {
      int st = 0;
      rusage u{};
      const pid_t who = ::wait4(-1, &st, WNOHANG, &u);
      if (who <= 0) return;
      if (who == m.guardian_pid) {  // ours, not CMD's
        m.guardian_pid = -1;
        continue;
      }
      const double maxrss = static_cast<double>(u.ru_maxrss) * 1024.0;
      m.call(observer, [&] { observer.reaped(who, st, maxrss); });
      if (who == m.pid) {
        m.release_guardian();  // from here on a killed genscope leaves only descendants behind
        status = st;
        exited = true;
        last_data_ns = Step::now_ns();
      }
    }
  };

  // True while this process has children, reaping those already waitable.
  auto children_left = [&] {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;  // ECHILD
    if (info.si_pid != 0) reap();
    return true;
  };

  for (;;) {
    pollfd fds[4];
    int count = 0;
    detail::Fd* sources[3] = {&m.out_read, &m.err_read, &m.events_read};
    const int streams[3] = {1, 2, 0};
    int source_of[4] = {-1, -1, -1, -1};
    fds[count++] = {m.signals.get(), POLLIN, 0};
    for (int i = 0; i < 3; ++i) {
      if (!sources[i]->ok()) continue;
      source_of[count] = i;
      fds[count++] = {sources[i]->get(), POLLIN, 0};
    }
    const std::int64_t now = Step::now_ns();
    if (exited) {
      // Every stream closed: done, unless adopted descendants are still ours. A process
      // closes its files a moment before it becomes waitable, so one that ended the output
      // may not be reaped yet; such descendants are waited for within the same window.
      if (count == 1 && !(m.options.adopt_orphans && children_left())) break;
      if (now - last_data_ns >= quiet_ns) break;  // descendants hold on: stop waiting
    }
    std::int64_t wait_ns = next_tick - now;
    if (exited) wait_ns = std::min(wait_ns, last_data_ns + quiet_ns - now);
    const int timeout_ms = static_cast<int>(std::max<std::int64_t>(0, (wait_ns + 999'999) / 1'000'000));
    const int ready = ::poll(fds, static_cast<nfds_t>(count), timeout_ms);
    if (ready < 0 && errno != EINTR) break;
    if (Step::now_ns() >= next_tick) {
      next_tick = Step::now_ns() + tick_interval.count() * 1'000'000;
      m.call(observer, [&] { observer.tick(Step::now_ns()); });
    }
    if (ready <= 0) continue;
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(m.signals.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        const int signo = static_cast<int>(info.ssi_signo);
        if (signo == SIGCHLD) {
          reap();
        } else if (signo == SIGWINCH) {
          if (m.options.pty && m.out_read.ok()) {
            winsize size{};
            for (int fd : {1, 2, 0}) {
              if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) break;
            }
            if (size.ws_col > 0) {
              ::ioctl(m.out_read.get(), TIOCSWINSZ, &size);
              if (m.err_read.ok()) ::ioctl(m.err_read.get(), TIOCSWINSZ, &size);
            }
          }
        } else if (!exited) {
          // The terminal already delivered its own signals to CMD (same process group).
          const bool from_terminal = info.ssi_code == SI_KERNEL;
          if (!from_terminal || m.options.pty) {
            ::kill(m.pid, signo);
            m.call(observer, [&] { observer.signal_forwarded(signo); });
          }
        }
      }
    }
    for (int k = 1; k < count; ++k) {
      if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const int i = source_of[k];
      if (!pump(*sources[i], streams[i])) sources[i]->reset();
    }
  }
  if (!exited) {
    // Left the loop on a poll error: wait for CMD anyway, its status is the answer.
    int st = 0;
    rusage u{};
    while (::wait4(m.pid, &st, 0, &u) < 0 && errno == EINTR) {
    }
    status = st;
    m.call(observer, [&] { observer.reaped(m.pid, st, static_cast<double>(u.ru_maxrss) * 1024.0); });
  }
  m.out_read.reset();
  m.err_read.reset();
  m.events_read.reset();
  return status;
}

}  // namespace genscope

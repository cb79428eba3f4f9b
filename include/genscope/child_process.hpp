// ChildProcess: runs a program the way `genscope run -- CMD` does — its stdin inherited, its
// stdout and stderr passed through byte for byte (and shown to an observer), SIGINT/SIGTERM/
// SIGHUP forwarded, every descendant adopted when its parent dies (child subreaper), and an
// event channel: a pipe whose write end CMD finds in GENSCOPE_EVENTS_FD.
//
// Example:
//   genscope::ChildProcess child({.argv = {"python3", "gen.py"}});  // blocks the signals
//   child.start();                                     // genscope::Error when CMD cannot start
//   int status = child.run(observer);                  // until CMD exited and output drained
//   return genscope::ChildProcess::exit_code(status);  // code, or 128 + signal
//
// Construct the ChildProcess before starting any thread (a Monitor's run): it blocks the
// forwarded signals in the calling thread, and threads inherit that mask, so the signals
// reach the forwarding loop instead of ending genscope. Details: docs/run.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace genscope {

/// How a program is started.
struct ChildOptions {
  std::vector<std::string> argv;  ///< Program (looked up in PATH) and arguments.
  /// stdout and stderr on two pseudo-terminals (for programs that only draw progress bars on
  /// a terminal); output post-processing is off, so bytes still pass unchanged.
  bool pty = false;
  bool event_channel = true;      ///< Create the GENSCOPE_EVENTS_FD pipe.
  std::filesystem::path cgroup;   ///< A cgroup directory the program joins before exec.
  bool adopt_orphans = true;      ///< Become the child subreaper (descendants stay ours).
  /// Start a guardian process that takes CMD's output over if this process is killed
  /// (SIGKILL, a crash), so that CMD runs to its end instead of dying of SIGPIPE at its next
  /// write (docs/reliability.md, "When genscope itself is killed").
  bool guardian = true;
  /// When the program's stdout ends (it and every descendant closed it), point this
  /// process's stdout at /dev/null, so a reader of it (`| tee log`) sees the end then, not
  /// when genscope exits. For callers that write nothing to stdout themselves.
  bool release_stdout = true;
  /// After the program exited, how long output from descendants that still hold its pipes
  /// keeps being passed on once it goes quiet, and (with adopt_orphans) how long adopted
  /// descendants that outlive it are waited for, to be reaped.
  std::chrono::milliseconds drain_quiet{500};
};

/// What the pass-through loop reports. Exceptions thrown here are caught: the observer is
/// then no longer called (observer_error() says why) and the pass-through goes on.
class ChildObserver {
 public:
  virtual ~ChildObserver() = default;
  /// Bytes the program wrote on stream 1 (stdout) or 2 (stderr), after they were passed on.
  virtual void output(int /*stream*/, std::string_view /*bytes*/, std::int64_t /*steady_ns*/) {}
  /// One line of the event channel, without its '\n'. A line over the limit (16 MiB,
  /// event_line::kMaxLineBytes) arrives cut one byte past it, so that it reads as too long;
  /// the rest of it is skipped.
  virtual void event_line(std::string_view /*line*/, std::int64_t /*steady_ns*/) {}
  /// A child process was reaped (the program, or an adopted orphan) with its wait status and
  /// wait4's ru_maxrss in bytes.
  virtual void reaped(int /*pid*/, int /*wait_status*/, double /*maxrss_bytes*/) {}
  /// A signal genscope received was forwarded to the program.
  virtual void signal_forwarded(int /*signal*/) {}
  /// Called about every `tick_interval` while the loop waits (for periodic work).
  virtual void tick(std::int64_t /*steady_ns*/) {}
};

/// A program started and passed through by genscope.
class ChildProcess {
 public:
  /// Prepares pipes (or ptys) and the event channel and blocks the forwarded signals.
  /// Throws genscope::Error("SpawnFailed") when a pipe or pty cannot be made.
  explicit ChildProcess(ChildOptions options);
  /// Restores the signal mask and dispositions; closes what is left open. Never kills CMD.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// Starts the program. Throws genscope::Error: "CommandNotFound" (no such program in
  /// PATH), "CommandNotExecutable" (permission denied, not an executable), "SpawnFailed".
  void start();
  /// The program's pid (after start()).
  int pid() const noexcept;
  /// This process's own VmHWM when it started the program (bytes): the program's
  /// ru_maxrss includes the image it was forked from, so a ru_maxrss not above this figure
  /// says nothing about the program itself.
  double spawn_hwm_bytes() const noexcept;
  /// Passes output through and forwards signals until the program exited and its output is
  /// drained; returns its wait status.
  int run(ChildObserver& observer, std::chrono::milliseconds tick_interval = std::chrono::milliseconds(100));
  /// Why the observer stopped being called (it threw); empty when it never did.
  const std::string& observer_error() const noexcept;
  /// What went wrong passing output on: one line per stream of this process that could not
  /// be written (EBADF: started with it closed; ENOSPC, EIO) — that stream's output was still
  /// read and shown to the observer. A reader that went away (EPIPE) is not listed: CMD's
  /// pipe is closed then, so that CMD learns it as it would without genscope.
  const std::vector<std::string>& pass_through_notes() const noexcept;
  /// The exit code a wrapper returns: the exit status, or 128 + N when killed by signal N.
  static int exit_code(int wait_status) noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace genscope

// `genscope watch --pid PID [--log FILE]`: attaches to a running program (a ComfyUI server):
// the memory of its process tree, steps from its log file followed like `tail -F`, one run
// per prompt recorded as it completes, until the program exits or genscope gets SIGINT,
// SIGTERM or SIGHUP. Needs only what reading /proc needs; another user's processes cannot
// have their VmHWM reset (their peaks are sampled, and the report says so). docs/run.md.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "command.hpp"
#include "genscope/error.hpp"
#include "genscope/log_follower.hpp"
#include "genscope/process_tree.hpp"
#include "genscope/step.hpp"
#include "watched_runs.hpp"

namespace genscope::cli {
namespace {

// A descriptor that becomes readable when `pid` exits (pidfd, Linux >= 5.3); -1 when the
// kernel has none (then /proc/<pid> is checked on every tick).
int open_pidfd(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

bool process_exists(int pid) {
  std::error_code ec;
  return std::filesystem::exists("/proc/" + std::to_string(pid) + "/stat", ec);
}

// The program's name: its argv[0] without the folder (comm is cut at 15 characters).
std::string process_name(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string name;
  std::getline(in, name, '\0');
  if (const std::size_t slash = name.rfind('/'); slash != std::string::npos) name.erase(0, slash + 1);
  return name.empty() ? "pid" + std::to_string(pid) : name;
}

}  // namespace

void register_watch_command(CLI::App& app, CommandContext& context) {
  struct Options {
    WatchedRunOptions watched;
    int pid = 0;
    std::string log;
    double poll_ms = 100;
  };
  auto o = std::make_shared<Options>();
  o->watched.runs = "announced";  // a server attached mid-life: its prompts are the runs
  CLI::App* cmd = app.add_subcommand(
      "watch", "Attach to a running program: memory of its process tree, steps from its log");
  cmd->add_option("--pid", o->pid, "The program's process id")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--log", o->log, "Its log file, followed like tail -F (from its current end)");
  cmd->add_option("--log-poll", o->poll_ms, "How often the log is read, in ms (default 100)")
      ->check(CLI::Range(1.0, 10000.0));
  add_watched_run_options(*cmd, o->watched);
  cmd->callback([o, &context] {
    if (!process_exists(o->pid))
      throw Error("ProcessNotFound", "no process " + std::to_string(o->pid));
    WatchedRuns runs(o->watched, process_name(o->pid), "watch");
    std::optional<LogFollower> log;
    if (!o->log.empty()) log.emplace(o->log);  // ReadFailed: unreadable --log, exit 2
    // SIGINT/SIGTERM/SIGHUP end the watch (the program goes on); blocked before the
    // monitor's threads start so that they all reach the signalfd.
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    ::pthread_sigmask(SIG_BLOCK, &set, &old);
    const int signals = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    const int pidfd = open_pidfd(o->pid);
    auto tree = std::make_shared<ProcessTree>(
        ProcessTreeOptions{.root_pid = o->pid, .reset_peaks = !o->watched.no_peak_reset});
    std::vector<std::string> notes = {
        "watch: attached to pid " + std::to_string(o->pid) +
        " while it ran; figures before that are not known; no memory cgroup (the program was "
        "not started by genscope)"};
    WatchSession& session = runs.start_session(tree, notes);
    session.start(Step::now_ns());
    std::string bytes;
    std::string last_error;
    int stop_signal = 0;
    auto read_log = [&] {
      if (!log) return;
      for (;;) {
        bytes.clear();
        const LogPoll p = log->poll(bytes);
        if (!bytes.empty()) session.output(1, bytes, Step::now_ns());
        if (!p.error.empty() && p.error != last_error) std::cerr << "genscope: warning: " << p.error << "\n";
        last_error = p.error;
        if (p.bytes < (1u << 20)) return;  // drained
      }
    };
    for (;;) {
      pollfd fds[2] = {{signals, POLLIN, 0}, {pidfd, POLLIN, 0}};
      const int ready = ::poll(fds, pidfd >= 0 ? 2 : 1, static_cast<int>(o->poll_ms));
      read_log();
      if (ready > 0 && (fds[0].revents & POLLIN)) {
        signalfd_siginfo info;
        if (::read(signals, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
          stop_signal = static_cast<int>(info.ssi_signo);
          break;
        }
      }
      const bool exited = pidfd >= 0 ? (ready > 0 && (fds[1].revents & POLLIN) != 0)
                                     : !process_exists(o->pid);
      if (exited) break;
    }
    read_log();
    // Not our child: its exit status cannot be read. A watch ended by a signal leaves the
    // program running; its open steps are closed as failed (their end was not seen).
    const int status = stop_signal != 0 ? W_EXITCODE(0, stop_signal) : W_EXITCODE(0, 0);
    if (stop_signal != 0) {
      runs.set_ending("watch: stopped by " + std::string(::strsignal(stop_signal)) +
                          " while this run was open; the program goes on",
                      "unknown (watch stopped)");
    } else {
      runs.set_ending("watch: the program exited while this run was open; genscope cannot read "
                      "the exit status of a process it did not start",
                      "unknown (not genscope's child)");
    }
    session.program_exited(status, Step::now_ns());
    runs.finish();
    if (pidfd >= 0) ::close(pidfd);
    ::close(signals);
    const timespec zero{0, 0};
    while (::sigtimedwait(&set, nullptr, &zero) > 0) {
    }  // a second Ctrl-C meanwhile must not end genscope once the mask is restored
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    std::cerr << "genscope: watch of pid " << o->pid << " ended ("
              << (stop_signal != 0 ? std::string("signal ") + ::strsignal(stop_signal)
                                   : std::string("the process exited"))
              << "), " << runs.runs() << " run(s)\n";
    context.exit_code = 0;
  });
}

}  // namespace genscope::cli

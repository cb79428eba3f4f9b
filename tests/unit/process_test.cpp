// Tests of src/process: ChildProcess (spawn errors, exit statuses, pass-through, the event
// channel, signal forwarding, adopted orphans, ptys, a reader that goes away) and LogFollower
// (appends, truncation, rotation). Real child processes throughout.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "genscope/child_process.hpp"
#include "genscope/error.hpp"
#include "genscope/log_follower.hpp"

namespace genscope {
namespace {

std::filesystem::path temp_dir() {
  const char* base = std::getenv("GENSCOPE_TEST_TMP");
  std::filesystem::path dir = std::filesystem::path(base ? base : "/tmp") /
                              ("process_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Points this process's fd 1 and 2 at files while a ChildProcess passes output through.
class CapturedOutput {
 public:
  CapturedOutput() : dir_(temp_dir()) {
    std::fflush(stdout);
    std::fflush(stderr);
    saved_out_ = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
    saved_err_ = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
    const int out = ::open((dir_ / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = ::open((dir_ / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::close(out);
    ::close(err);
  }
  ~CapturedOutput() { restore(); }
  void restore() {
    if (saved_out_ < 0) return;
    ::dup2(saved_out_, 1);
    ::dup2(saved_err_, 2);
    ::close(saved_out_);
    ::close(saved_err_);
    saved_out_ = saved_err_ = -1;
  }
  std::string out() const { return read_file(dir_ / "out"); }
  std::string err() const { return read_file(dir_ / "err"); }

 private:
  std::filesystem::path dir_;
  int saved_out_ = -1, saved_err_ = -1;
};

struct Recorder : ChildObserver {
  std::string out, err;
  std::vector<std::string> events;
  std::vector<std::pair<int, int>> reaped_pids;  // pid, status
  std::vector<int> forwarded;
  std::function<void(Recorder&)> on_output;
  void output(int stream, std::string_view bytes, std::int64_t) override {
    (stream == 1 ? out : err).append(bytes);
    if (on_output) on_output(*this);
  }
  void event_line(std::string_view line, std::int64_t) override { events.emplace_back(line); }
  void reaped(int pid, int status, double) override { reaped_pids.emplace_back(pid, status); }
  void signal_forwarded(int signal) override { forwarded.push_back(signal); }
};

int run_quietly(ChildOptions options, Recorder& recorder, CapturedOutput* captured = nullptr) {
  std::optional<CapturedOutput> own;
  if (captured == nullptr) own.emplace();
  ChildProcess child(std::move(options));
  child.start();
  return child.run(recorder);
}

TEST(ChildProcess, ExitCodesAsAShellReportsThem) {
  Recorder r;
  EXPECT_EQ(ChildProcess::exit_code(run_quietly({.argv = {GENSCOPE_TEST_CHILD, "exit", "3"}}, r)), 3);
  EXPECT_EQ(ChildProcess::exit_code(run_quietly({.argv = {"sh", "-c", "kill -KILL $$"}}, r)), 137);
  EXPECT_EQ(ChildProcess::exit_code(run_quietly({.argv = {"true"}}, r)), 0);
}

TEST(ChildProcess, ProgramsThatCannotStartAreNamedErrors) {
  auto error_of = [](std::vector<std::string> argv) -> std::string {
    try {
      ChildProcess child({.argv = std::move(argv)});
      child.start();
    } catch (const Error& e) {
      return e.name();
    }
    return "no error";
  };
  EXPECT_EQ(error_of({"genscope-no-such-program-here"}), "CommandNotFound");
  EXPECT_EQ(error_of({"/nonexistent/dir/prog"}), "CommandNotFound");
  const std::filesystem::path plain = temp_dir() / "not_executable";
  std::ofstream(plain) << "echo hi\n";
  ::chmod(plain.c_str(), 0644);
  EXPECT_EQ(error_of({plain.string()}), "CommandNotExecutable");
  EXPECT_EQ(error_of({temp_dir().string()}), "CommandNotExecutable");
  EXPECT_THROW(ChildProcess({.argv = {}}), Error);
}

TEST(ChildProcess, StdoutAndStderrPassThroughSeparatelyAndAreObserved) {
  Recorder r;
  CapturedOutput captured;
  const int status = run_quietly(
      {.argv = {"sh", "-c", "printf 'a\\rb\\n'; printf 'err\\n' >&2; printf 'tail-no-newline'"}},
      r, &captured);
  captured.restore();
  EXPECT_EQ(status, 0);
  EXPECT_EQ(captured.out(), "a\rb\ntail-no-newline");
  EXPECT_EQ(captured.err(), "err\n");
  EXPECT_EQ(r.out, captured.out());
  EXPECT_EQ(r.err, captured.err());
}

TEST(ChildProcess, EventChannelLinesAndNoOtherDescriptorLeaks) {
  // Descriptors this test process would pass on to any child (no FD_CLOEXEC).
  std::set<std::string> inheritable;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::atoi(e.path().filename().c_str());
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) inheritable.insert(e.path().filename());
  }
  Recorder events;
  EXPECT_EQ(run_quietly({.argv = {GENSCOPE_TEST_CHILD, "events"}}, events), 0);
  ASSERT_EQ(events.events.size(), 5u);
  EXPECT_EQ(events.events[0], R"({"event":"begin","kind":"sampling","name":"denoise"})");
  EXPECT_EQ(events.events[4], R"({"event":"end"})");

  Recorder fds;
  CapturedOutput captured;
  ASSERT_EQ(run_quietly({.argv = {"sh", "-c", "echo fd=$GENSCOPE_EVENTS_FD; exec " +
                                                  std::string(GENSCOPE_TEST_CHILD) + " fds"}},
                        fds, &captured),
            0);
  captured.restore();
  std::istringstream lines(fds.out);
  std::string line, event_fd;
  std::set<std::string> open;
  while (std::getline(lines, line)) {
    if (line.rfind("fd=", 0) == 0) {
      event_fd = line.substr(3);
    } else {
      open.insert(line);
    }
  }
  ASSERT_FALSE(event_fd.empty());
  EXPECT_TRUE(open.count(event_fd)) << "the event channel's write end is open in CMD";
  for (const std::string& fd : open) {
    EXPECT_TRUE(fd == "0" || fd == "1" || fd == "2" || fd == event_fd || inheritable.count(fd))
        << "descriptor " << fd << " leaked into CMD";
  }
  // Without a channel there is no variable.
  Recorder none;
  CapturedOutput captured2;
  run_quietly({.argv = {"sh", "-c", "echo \"fd=${GENSCOPE_EVENTS_FD-unset}\""},
               .event_channel = false},
              none, &captured2);
  EXPECT_EQ(none.out, "fd=unset\n");
}

TEST(ChildProcess, SignalsFromAProcessAreForwarded) {
  // SIGTERM to genscope (here: this process) ends a child that does not handle it.
  Recorder term;
  term.on_output = [](Recorder&) { ::kill(::getpid(), SIGTERM); };
  EXPECT_EQ(ChildProcess::exit_code(run_quietly(
                {.argv = {"sh", "-c", "echo started; exec sleep 30"}}, term)),
            128 + SIGTERM);
  EXPECT_EQ(term.forwarded, std::vector<int>{SIGTERM});
  // A child that ignores SIGINT keeps running and its own exit status is the answer.
  Recorder ignore;
  bool sent = false;
  ignore.on_output = [&sent](Recorder& r) {
    if (!sent && r.out.find("ready") != std::string::npos) {
      sent = true;
      ::kill(::getpid(), SIGINT);
    }
  };
  EXPECT_EQ(run_quietly({.argv = {GENSCOPE_TEST_CHILD, "ignore-sigint", "300"}}, ignore), 0);
  EXPECT_EQ(ignore.forwarded, std::vector<int>{SIGINT});
  EXPECT_EQ(ignore.out, "ready\nfinished\n");
}

TEST(ChildProcess, OrphanedDescendantsAreAdoptedAndReaped) {
  Recorder r;
  const int status =
      run_quietly({.argv = {"sh", "-c", "(sleep 0.2; exit 4) & echo $!; exit 0"}}, r);
  EXPECT_EQ(status, 0);
  const int orphan = std::atoi(r.out.c_str());
  ASSERT_GT(orphan, 0);
  bool reaped = false;
  for (auto [pid, st] : r.reaped_pids) {
    if (pid == orphan) {
      reaped = true;
      EXPECT_EQ(WEXITSTATUS(st), 4);
    }
  }
  EXPECT_TRUE(reaped) << "the orphan was re-parented to genscope (child subreaper)";
}

TEST(ChildProcess, PtysLookLikeATerminalAndKeepBytesUnchanged) {
  Recorder r;
  CapturedOutput captured;
  const int status = run_quietly(
      {.argv = {"sh", "-c", "test -t 1 && test -t 2 && printf 'a\\nb\\r' && printf 'e\\n' >&2"},
       .pty = true},
      r, &captured);
  captured.restore();
  EXPECT_EQ(status, 0);
  EXPECT_EQ(captured.out(), "a\nb\r");  // no "\r\n" from the terminal's output processing
  EXPECT_EQ(captured.err(), "e\n");
}

TEST(ChildProcess, AReaderThatGoesAwayGivesCmdItsSigpipe) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ::close(p[0]);  // nobody reads genscope's stdout
  Recorder r;
  CapturedOutput captured;
  ::dup2(p[1], 1);
  ::close(p[1]);
  const int status = [&] {
    ChildProcess child({.argv = {GENSCOPE_TEST_CHILD, "bytes", "100000000", "1"}});
    child.start();
    return child.run(r);
  }();
  captured.restore();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE) << status;
}

TEST(ChildProcess, ObserverExceptionsDoNotStopThePassThrough) {
  struct Thrower : ChildObserver {
    int calls = 0;
    void output(int, std::string_view, std::int64_t) override {
      ++calls;
      throw std::runtime_error("observer broke");
    }
  } thrower;
  CapturedOutput captured;
  ChildProcess child({.argv = {"sh", "-c", "echo one; sleep 0.05; echo two"}});
  child.start();
  EXPECT_EQ(child.run(thrower), 0);
  captured.restore();
  EXPECT_EQ(captured.out(), "one\ntwo\n");
  EXPECT_EQ(thrower.calls, 1);
  EXPECT_EQ(child.observer_error(), "observer broke");
}

TEST(LogFollower, AppendsTruncationAndRotation) {
  const std::filesystem::path path = temp_dir() / "app.log";
  std::ofstream(path) << "old line before attaching\n";
  LogFollower log(path);
  std::string got;
  EXPECT_EQ(log.poll(got).bytes, 0u) << "starts at the end";
  std::ofstream(path, std::ios::app) << "got prompt\n";
  LogPoll p = log.poll(got);
  EXPECT_EQ(got, "got prompt\n");
  EXPECT_FALSE(p.truncated || p.rotated);
  // copytruncate: the same file cut to zero, then written again.
  std::ofstream(path, std::ios::trunc) << "after truncate\n";
  got.clear();
  p = log.poll(got);
  EXPECT_TRUE(p.truncated);
  EXPECT_EQ(got, "after truncate\n");
  // create rotation: the file renamed, the rest of it still read, then the new file.
  std::ofstream(path, std::ios::app) << "last of old\n";
  std::filesystem::rename(path, temp_dir() / "app.log.1");
  got.clear();
  p = log.poll(got);
  EXPECT_EQ(got, "last of old\n");
  EXPECT_FALSE(p.error.empty()) << "the path is missing for now";
  std::ofstream(path) << "new file\n";
  got.clear();
  p = log.poll(got);
  EXPECT_TRUE(p.rotated);
  EXPECT_EQ(got, "new file\n");
  EXPECT_TRUE(p.error.empty());
  // Bounded reads: the rest comes with the next poll.
  std::ofstream(path, std::ios::app) << std::string(100, 'x');
  got.clear();
  EXPECT_EQ(log.poll(got, 60).bytes, 60u);
  EXPECT_EQ(log.poll(got, 60).bytes, 40u);
}

TEST(LogFollower, UnreadablePathsAreNamedErrors) {
  auto name_of = [](const std::filesystem::path& p) -> std::string {
    try {
      LogFollower log(p);
    } catch (const Error& e) {
      return e.name();
    }
    return "no error";
  };
  EXPECT_EQ(name_of(temp_dir() / "missing.log"), "ReadFailed");
  EXPECT_EQ(name_of(temp_dir()), "ReadFailed");
}

}  // namespace
}  // namespace genscope
